"""Fuzzing ALFWorld with hostile actions (run safety): no exception, a consistent environment.

The stream and the checks after every step are ``tests/envs/fuzz_actions.py``'s. Every
test here needs the engine (``tests/conftest.py`` marks them ``engine`` and ``slow``). The
10,000-action run (about 4 minutes on 2 cores) is ``benchmarks/alfworld_env.py``'s, which
records ``fuzz_actions`` and ``fuzz_exceptions``; the suite plays 1,000.
"""

from ..fuzz_actions import fuzz


def _assert_survives(env, tasks, n_actions, seed):
    report = fuzz(env, tasks, n_actions, seed)
    assert report.actions == n_actions
    assert report.failures() == [], report.summary()
    assert report.coverage_gaps() == [], report.summary()


def test_a_thousand_hostile_actions_raise_nothing_and_leave_alfworld_consistent(env,
                                                                                 train_games):
    _assert_survives(env, train_games, 1_000, seed=0)

