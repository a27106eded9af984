"""The tau environment: the action format, bad input answered with tau2's texts and the database
untouched, a fresh database per rollout, the endings and their rewards."""

from __future__ import annotations

import pytest

from agentcredit.envs.tau.actions import Malformed, Message, ToolCall, parse_action
from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.options import TauConfig
from agentcredit.envs.tau.tasks import build_tasks

from ..fuzz_actions import fuzz

CANCEL = ('<tool_call>{"name": "cancel_pending_order", "arguments": {"order_id": "#W5918442", '
          '"reason": "no longer needed"}}</tool_call>')


@pytest.fixture
def retail():
    env = TauEnv("retail")
    env.reset(build_tasks("retail", "base")[0])
    return env


def test_tool_calls_tagged_or_bare_json_and_messages_are_told_apart():
    assert parse_action('<tool_call>{"name": "calculate", "arguments": {"expression": "1+1"}}'
                        '</tool_call>') == ToolCall("calculate", {"expression": "1+1"})
    assert parse_action(' {"name": "list_all_airports"} ') == ToolCall("list_all_airports", {})
    assert parse_action("Could you give me your email?") == Message(
        "Could you give me your email?")
    for text in ('<tool_call>{"name": "calculate"', '{"name": calculate}', '{"arguments": {}}',
                 '{"name": "x", "arguments": [1]}', '{"name": "x", "args": {}}', "", "  ", 7):
        assert isinstance(parse_action(text), Malformed), text


MISSING_REASON = ('<tool_call>{"name": "cancel_pending_order", "arguments": '
                  '{"order_id": "#W5918442"}}</tool_call>')
EXTRA_ARGUMENT = ('<tool_call>{"name": "cancel_pending_order", "arguments": {"order_id": '
                  '"#W5918442", "reason": "no longer needed", "force": true}}</tool_call>')


@pytest.mark.parametrize("action, answer", [
    ('<tool_call>{"name": "cancel_pending_order", "arguments": {"order_id": "#W5918442"',
     "Error: a tool call must end with </tool_call>"),
    ('{"name": "cancel_pending_order", "arguments": {"order_id": }}',
     "Error: the tool call is not valid JSON: Expecting value at character 59"),
    ('{"name": "get_order_details", "arguments": {"order_id": ' + "[" * 5_000 + "]" * 5_000
     + "}}", "Error: the tool call nests arrays and objects too deep (at most 64)"),
    ('{"name": "get_order_details", "arguments": {"order_id": [' + "[" * 64 + "]" * 64 + "]}}",
     "Error: the tool call nests arrays and objects 67 deep (at most 64)"),
    ('{"name": "get_order_details", "arguments": {"order_id": ' + "7" * 5_000 + "}}",
     "Error: the tool call holds a number of 5000 characters (at most 100)"),
    ('{"name": "get_order_details", "arguments": {"order_id": NaN}}',
     "Error: the tool call holds NaN, which is not a JSON number"),
    ('<tool_call>{"name": "drop_tables", "arguments": {}}</tool_call>',
     "Tool result: Error: Tool 'drop_tables' not found."),
    (MISSING_REASON, ("Tool result: Error: RetailTools.cancel_pending_order() missing 1 "
                      "required positional argument: 'reason'")),
    (EXTRA_ARGUMENT, ("Tool result: Error: RetailTools.cancel_pending_order() got an unexpected "
                      "keyword argument 'force'")),
])
def test_each_kind_of_bad_input_is_answered_invalid_and_leaves_the_database_alone(retail, action,
                                                                                 answer):
    before = retail.snapshot()
    obs, reward, done, info = retail.step(action)
    assert obs.text == answer
    assert (reward, done, info.valid) == (0.0, False, False)
    assert retail.snapshot() == before
    assert retail.db.changes() == {}


def test_a_tool_that_refuses_a_well_formed_call_is_a_valid_turn_with_tau2s_error(retail):
    obs, _, _, info = retail.step('<tool_call>{"name": "cancel_pending_order", "arguments": '
                                  '{"order_id": "#W2611340", "reason": "no longer needed"}}'
                                  '</tool_call>')
    assert obs.text == "Tool result: Error: Non-pending order cannot be cancelled"
    assert info.valid and retail.db.changes() == {}


def test_a_write_changes_this_rollouts_database_and_the_next_reset_starts_fresh(retail):
    obs, _, _, info = retail.step(CANCEL)
    assert info.valid and '"status": "cancelled"' in obs.text
    assert set(retail.db.changes()["orders"]) == {"#W5918442"}
    assert any(k.startswith("db:orders/#W5918442") for k in retail.snapshot())
    other = TauEnv("retail")
    other.reset(build_tasks("retail", "base")[0])
    assert other.db.changes() == {}
    retail.reset(build_tasks("retail", "base")[0])
    assert retail.db.changes() == {}
    assert retail.db["orders"]["#W5918442"]["status"] == "pending"


def test_the_user_opens_and_a_stop_token_ends_the_conversation_with_the_reward():
    task = build_tasks("retail", "base")[0]
    env = TauEnv("retail")
    obs = env.reset(task)
    assert obs.text.startswith("User: Hi. You received your order #W2378156")
    assert "Yusuf Rossi" in obs.text
    obs, reward, done, info = env.step("Is there anything else I can help you with?")
    assert obs.text == "User: No, that is all. Thank you! ###STOP###"
    # the golden actions exchange two items: nothing was done, so the DB component is 0; the
    # task has NL_ASSERTION in its basis but no assertion, which tau2 scores 1
    assert done and reward == 0.0 and not info.won
    assert env.last_reward.components == {"DB": 0.0, "NL_ASSERTION": 1.0}
    assert env.last_reward.ending == "user_stop"
    after = env.step("hello")
    assert after[2] and not after[3].valid


def test_the_step_limit_and_too_many_errors_end_the_episode_unrewarded():
    task = next(t for t in build_tasks("airline", "base") if t.task_type == "no_write")
    env = TauEnv("airline", max_steps=2)
    env.reset(task)
    env.step('{"name": "list_all_airports", "arguments": {}}')
    _, reward, done, _ = env.step('{"name": "list_all_airports", "arguments": {}}')
    assert done and reward == 0.0 and env.last_reward.ending == "max_steps"
    # the same task, stopped by the user after no write, earns 1: the DB matches the golden one
    assert env.last_reward.components["DB"] == 1.0
    env = TauEnv("airline", TauConfig(max_errors=2))
    env.reset(task)
    env.step("{")
    _, reward, done, info = env.step('{"name": "nope"}')
    assert done and not info.valid and env.last_reward.ending == "too_many_errors"


def test_hostile_action_streams_raise_nothing_and_leave_the_environment_consistent():
    tasks = build_tasks("retail", "test")[:6] + build_tasks("airline", "test")[:4]
    for env, chosen in ((TauEnv("retail"), tasks[:6]), (TauEnv("airline"), tasks[6:])):
        report = fuzz(env, chosen, 300, seed=0)
        assert report.failures() == [], report.summary()


def test_long_observations_are_cut_when_configured():
    env = TauEnv("retail", TauConfig(observation_chars=80))
    env.reset(build_tasks("retail", "base")[0])
    obs, *_ = env.step('{"name": "get_product_details", "arguments": {"product_id": '
                       '"1656367028"}}')
    assert len(obs.text) == 80 and obs.text.endswith("…")
