"""Fuzzing search QA with hostile actions (run safety): no exception, a consistent environment."""

from ..fuzz_actions import fuzz


def test_a_thousand_hostile_actions_raise_nothing_and_leave_searchqa_consistent(env, test_tasks):
    report = fuzz(env, test_tasks, 1_000, seed=0)
    assert report.actions == 1_000
    assert report.failures() == [], report.summary()
    assert report.coverage_gaps() == [], report.summary()
