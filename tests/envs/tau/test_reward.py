"""tau2's reward from the reward basis, on hand-worked conversations."""

from __future__ import annotations

from agentcredit.envs.tau.database import Database
from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.reward import communicated, replay_golden, task_reward


def _airline_task(info: list[str]) -> dict:
    """Airline task 0 (no golden action; basis DB and COMMUNICATE) with its strings replaced."""
    task = dict(load_domain("airline").tasks["0"])
    task["evaluation_criteria"] = {**task["evaluation_criteria"], "communicate_info": info}
    return task


def test_communicate_compares_lower_cased_with_the_messages_commas_removed():
    # tau2 removes commas from the message, not from the string: "1,628" can never be found
    assert communicated(_airline_task(["1628", "Gold"]),
                        ["Your refund is $1,628.", "You are a GOLD member"]) == {
        "1628": True, "Gold": True}
    assert communicated(_airline_task(["1,628"]), ["Your refund is $1,628."]) == {
        "1,628": False}


def test_the_reward_is_the_product_of_the_basis_and_zero_without_a_stop():
    task = _airline_task(["1628"])
    untouched = Database(load_domain("airline").db).fingerprint()
    said = ["It is 1628 dollars."]
    assert task_reward("airline", task, untouched, said, "user_stop").reward == 1.0
    assert task_reward("airline", task, untouched, ["It is 1627."], "user_stop").components == {
        "DB": 1.0, "COMMUNICATE": 0.0}
    for ending in ("max_steps", "too_many_errors", "user_error"):
        assert task_reward("airline", task, untouched, said, ending).reward == 0.0
    assert task_reward("airline", task, untouched, said, "agent_stop").reward == 1.0


def test_the_db_component_compares_with_the_replayed_golden_actions():
    task = load_domain("retail").tasks["0"]  # exchanges two keyboard / thermostat items
    golden = replay_golden("retail", task)
    assert golden["orders"]["#W2378156"]["status"] == "exchange requested"
    fresh = Database(load_domain("retail").db).fingerprint()
    assert task_reward("retail", task, golden.fingerprint(), [], "user_stop").components["DB"] \
        == 1.0
    assert task_reward("retail", task, fresh, [], "user_stop").components["DB"] == 0.0


def test_nl_assertions_are_skipped_and_reported_without_a_judge_and_judged_with_one():
    task = next(t for t in load_domain("retail").tasks.values()
                if t["evaluation_criteria"]["nl_assertions"]
                and "NL_ASSERTION" in t["evaluation_criteria"]["reward_basis"])
    golden = replay_golden("retail", task).fingerprint()
    skipped = task_reward("retail", task, golden, [], "user_stop")
    assert skipped.skipped == ("NL_ASSERTION",) and skipped.reward == 1.0
    assert "NL_ASSERTION" not in skipped.components
    seen = []

    def judge(tau_task, conversation, assertions):
        seen.append((tau_task["id"], list(conversation), list(assertions)))
        return 0.0

    conversation = [{"role": "assistant", "content": "Done."}]
    judged = task_reward("retail", task, golden, ["Done."], "user_stop", judge, conversation)
    assert judged.reward == 0.0 and judged.components["NL_ASSERTION"] == 0.0
    assert seen == [(task["id"], conversation, task["evaluation_criteria"]["nl_assertions"])]
    no_verdict = task_reward("retail", task, golden, [], "user_stop", lambda *a: None)
    assert no_verdict.skipped == ("NL_ASSERTION",) and no_verdict.reward == 1.0
