"""Environment suites: built from an environment's name, its options and the game counts, with
no run config."""

from __future__ import annotations

import pytest

from agentcredit.envs.alfworld.options import AlfWorldConfig, GeneratorConfig
from agentcredit.envs.suites import GamesPerType, build_env_suite, env_suite_names, suite_splits
from agentcredit.envs.tau.options import TauConfig


def test_every_packaged_environment_is_registered_with_its_splits():
    assert {"alfworld", "webshop", "searchqa", "tau-retail", "tau-airline"} <= set(
        env_suite_names())
    assert suite_splits("alfworld") == ("train", "valid_seen", "valid_unseen")
    assert suite_splits("tau-airline") == ("train", "test", "base")


def test_a_suite_keeps_the_options_and_game_counts_it_is_built_on():
    options = AlfWorldConfig(generator=GeneratorConfig(seed=3), cache_dir="/tmp/games")
    suite = build_env_suite("alfworld", options, GamesPerType(train=5, valid=2))
    assert suite.options is options and suite.games == GamesPerType(train=5, valid=2)
    tau = build_env_suite("tau-airline", TauConfig(max_tasks=1), GamesPerType(1, 1))
    assert tau.domain == "airline" and tau.options.max_tasks == 1


def test_an_unknown_environment_lists_the_known_ones():
    with pytest.raises(KeyError, match="unknown environment 'alfwrld'; known: .*alfworld"):
        build_env_suite("alfwrld", None, GamesPerType(1, 1))
