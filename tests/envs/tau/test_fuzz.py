"""Fuzzing tau with hostile actions, JSON tool calls among them (run safety): no exception, a
consistent environment.

The stream and the checks after every step are ``tests/envs/fuzz_actions.py``'s; the tool-call
kinds add deep nesting, huge numbers and wrongly typed arguments to the generic ones.
"""

import pytest

from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.tasks import build_tasks

from ..fuzz_actions import KINDS, TOOL_CALL_KINDS, fuzz

ALL_KINDS = KINDS + TOOL_CALL_KINDS


def _assert_survives(domain: str, n_actions: int, seed: int) -> None:
    report = fuzz(TauEnv(domain), build_tasks(domain, "test"), n_actions, seed, kinds=ALL_KINDS)
    assert report.actions == n_actions
    assert report.failures() == [], report.summary()
    assert report.coverage_gaps(ALL_KINDS) == [], report.summary()


@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_a_thousand_hostile_tool_calls_raise_nothing_and_leave_tau_consistent(domain):
    _assert_survives(domain, 1_000, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("domain", ["retail", "airline"])
def test_ten_thousand_hostile_tool_calls_raise_nothing_and_leave_tau_consistent(domain):
    _assert_survives(domain, 10_000, seed=1)
