"""Environment suites: built from an environment's name, its options and the game counts, with
no run config."""

from __future__ import annotations

import dataclasses

import pytest

from agentcredit.envs import suites
from agentcredit.envs.alfworld.options import AlfWorldConfig, GeneratorConfig
from agentcredit.envs.suites import (
    GamesPerType,
    build_env_suite,
    env_suite_names,
    environment_spec,
    environment_specs,
    register_environment,
    suite_splits,
)
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


#: each built-in's hooks, as registered (the solver and planner as "module:name" text)
HOOKS = {
    "alfworld": ("agentcredit.envs.alfworld.solver:distance_to_finish",
                 "agentcredit.envs.alfworld.scripted:start", 50, "alfworld"),
    "webshop": ("agentcredit.envs.webshop.solver:distance_to_buy",
                "agentcredit.envs.webshop.scripted:start", 15, "webshop"),
    "searchqa": ("agentcredit.envs.searchqa.solver:distance_to_answer",
                 "agentcredit.envs.searchqa.scripted:start", None, "searchqa"),
    "tau-retail": ("agentcredit.envs.tau.solver:distance_to_resolve",
                   "agentcredit.envs.tau.scripted:start", None, "tau"),
    "tau-airline": ("agentcredit.envs.tau.solver:distance_to_resolve",
                    "agentcredit.envs.tau.scripted:start", None, "tau"),
}


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_every_built_in_registers_its_hooks_through_register_environment(name):
    solver, planner, max_steps, key = HOOKS[name]
    spec = environment_spec(name)
    assert (spec.solver, spec.planner, spec.max_steps, spec.config_key) == \
        (solver, planner, max_steps, key)


def test_only_alfworld_declares_probe_words_and_only_searchqa_a_solver_refusal():
    assert [s.name for s in environment_specs() if s.action_words] == ["alfworld"]
    assert {"take", "put", "go"} <= environment_spec("alfworld").action_words
    assert [s.name for s in environment_specs() if s.solver_refusal] == ["searchqa"]


def test_a_registered_environment_gets_its_hooks_and_a_config_key_from_its_name():
    @dataclasses.dataclass
    class Options:
        size: int = 2

    class Suite:
        splits = ("train",)
        validation_splits = ("train",)

    try:
        spec = register_environment("my-grid", Suite, options=Options, action_words=["go"],
                                    solver="agentcredit.envs.alfworld.solver:distance_to_finish")
        assert spec.config_key == "my_grid" and spec.action_words == frozenset({"go"})
        assert spec.hook("planner") is None
        from agentcredit.envs.alfworld.solver import distance_to_finish

        assert spec.hook("solver") is distance_to_finish
    finally:
        suites._SPECS.pop("my-grid", None)


def test_register_environment_refuses_a_suite_without_splits_and_options_that_are_no_dataclass():
    with pytest.raises(ValueError, match="'grid': .* has no splits; give the suite class"):
        register_environment("grid", object)
    with pytest.raises(TypeError, match="'grid': options must be a dataclass type; got"):
        register_environment("grid", type("S", (), {"splits": ("train",)}), options=dict)
