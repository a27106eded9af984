"""The tau solver's ``d(s)`` with the scripted user, on retail tasks whose golden actions are known:
golden calls not yet made (as a set) plus the closing messages; a harmful write is the cap."""

from __future__ import annotations

import pytest

from agentcredit.envs.base import ReplayMismatch
from agentcredit.envs.tau.actions import format_tool_call
from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.solver import distance_to_resolve
from agentcredit.envs.tau.tasks import build_tasks
from agentcredit.envs.tau.users import CLOSING_QUESTION
from agentcredit.train.evaluation.credit_check.truths import SolverTruth, solver_for

from ...played import played

CAP = 12
# tau-retail-69: find the user, read the user and the order, cancel it ("no longer needed");
# nothing to communicate. tau-retail-76: two cancels, then tell the refund 1939.05.
FIND = format_tool_call("find_user_id_by_name_zip",
                        {"first_name": "Emma", "last_name": "Smith", "zip": "10192"})
USER = format_tool_call("get_user_details", {"user_id": "emma_smith_8564"})
ORDER = format_tool_call("get_order_details", {"order_id": "#W2417020"})
CANCEL = format_tool_call("cancel_pending_order",
                          {"order_id": "#W2417020", "reason": "no longer needed"})
OTHER_ORDER = format_tool_call("get_order_details", {"order_id": "#W8367380"})


@pytest.fixture(scope="module")
def tasks():
    return {t.task_id: t for t in build_tasks("retail", "base")}


def d(task, prefix: list[str]) -> int:
    """``d`` after ``prefix``, its replay checked against a first play of it."""
    recorded = played(TauEnv("retail"), task, prefix)
    after = [s.observation for s in recorded.steps[1:]] + [recorded.final_observation]
    return distance_to_resolve(TauEnv("retail"), task, prefix, CAP, None, after)


@pytest.mark.parametrize("prefix, distance", [
    ([], 5),                               # four golden calls and the closing question
    ([USER], 4),                           # golden calls count in any order
    ([USER, USER], 4),                     # a call executes one golden action, once
    ([OTHER_ORDER], 5),                    # a read the golden actions do not make
    (["Could you tell me your name and zip code?"], 5),  # a message moves nothing
    ([FIND, USER, ORDER, CANCEL], 1),
    ([CANCEL], 4),
    ([FIND, USER, ORDER, CANCEL, CLOSING_QUESTION], 0),  # the user stops: won
])
def test_d_counts_the_golden_calls_not_made_plus_the_closing(tasks, prefix, distance):
    assert d(tasks["tau-retail-69"], prefix) == distance


@pytest.mark.parametrize("write", [
    # the golden order cancelled for the wrong reason: its record can never match
    format_tool_call("cancel_pending_order",
                     {"order_id": "#W2417020", "reason": "ordered by mistake"}),
    # another customer's order cancelled: a record outside the golden diff changed
    format_tool_call("cancel_pending_order",
                     {"order_id": "#W8367380", "reason": "no longer needed"}),
])
def test_a_harmful_write_is_the_cap(tasks, write):
    assert d(tasks["tau-retail-69"], [write]) == CAP


def test_a_harmful_write_after_the_golden_ones_still_loses_but_a_refused_one_does_not(tasks):
    done = [FIND, USER, ORDER, CANCEL]
    assert d(tasks["tau-retail-69"], [*done, format_tool_call(
        "cancel_pending_order", {"order_id": "#W8367380", "reason": "no longer needed"})]) == CAP
    # the order is cancelled already: the tool refuses a second cancel, nothing changes
    assert d(tasks["tau-retail-69"], [*done, format_tool_call(
        "cancel_pending_order", {"order_id": "#W2417020", "reason": "ordered by mistake"})]) == 1


def test_d_is_capped(tasks):
    assert distance_to_resolve(TauEnv("retail"), tasks["tau-retail-69"], [], 3) == 3


def test_a_conversation_ended_before_the_writes_is_lost(tasks):
    assert d(tasks["tau-retail-69"], [USER, CLOSING_QUESTION]) == CAP


def test_saying_what_must_be_communicated_saves_the_message(tasks):
    task = tasks["tau-retail-76"]
    assert d(task, []) == 4  # two cancels, the refund message, the closing question
    assert d(task, ["Your refund will be 1,939.05 dollars."]) == 3


def test_a_replay_that_differs_from_the_record_is_refused(tasks):
    with pytest.raises(ReplayMismatch, match="does not replay identically"):
        distance_to_resolve(TauEnv("retail"), tasks["tau-retail-69"], [USER], CAP, None,
                            ["Tool result: {}"])


def test_solver_truth_regrets_on_a_scripted_rollout(tasks):
    # d: 5, 4 (FIND), 4 (a read off the plan), 4 (invalid: unknown tool), 3, 2, 1, 0
    traj = played(TauEnv("retail"), tasks["tau-retail-69"],
                  [FIND, OTHER_ORDER, format_tool_call("delete_everything", {}), USER, ORDER,
                   CANCEL, CLOSING_QUESTION])
    assert traj.won and not traj.steps[2].valid
    assert solver_for("tau-airline") is solver_for("tau-retail")
    truth = SolverTruth(lambda: TauEnv("retail"), solver_for("tau-retail"), cap=CAP)
    assert truth.estimate([traj]).values.tolist() == [0.0, -1.0, -1.0, 0.0, 0.0, 0.0, 0.0]
