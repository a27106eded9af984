"""Fuzzing WebShop with hostile actions (run safety): no exception, a consistent environment.

The stream and the checks after every step are ``tests/envs/fuzz_actions.py``'s.
"""

import random

import pytest

from ..fuzz_actions import KINDS, HostileActions, fuzz


def _assert_survives(env, tasks, n_actions, seed):
    report = fuzz(env, tasks, n_actions, seed)
    assert report.actions == n_actions
    assert report.failures() == [], report.summary()
    assert report.coverage_gaps() == [], report.summary()


def test_a_thousand_hostile_actions_raise_nothing_and_leave_webshop_consistent(env, test_tasks):
    _assert_survives(env, test_tasks, 1_000, seed=0)


@pytest.mark.slow
def test_ten_thousand_hostile_actions_raise_nothing_and_leave_webshop_consistent(env, test_tasks):
    _assert_survives(env, test_tasks, 10_000, seed=1)


def test_the_hostile_stream_is_a_function_of_its_seed():
    admissible = ("click[back to search]", "click[< prev]", "click[b0abcdefgh]")

    def stream(seed):
        hostile = HostileActions(random.Random(seed))
        return [hostile.draw(admissible) for _ in range(200)]

    assert stream(3) == stream(3) != stream(4)
    assert {kind for kind, _ in stream(3)} == set(KINDS)
