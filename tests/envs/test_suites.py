"""Environment suites: built from an environment's name, its options and the game counts, with
no run config."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from agentcredit import plugins
from agentcredit.envs import suites
from agentcredit.envs.alfworld.options import AlfWorldConfig, GeneratorConfig
from agentcredit.envs.suites import (
    AlfWorldSuite,
    GamesPerType,
    build_env_suite,
    env_suite_names,
    environment_spec,
    environment_specs,
    register_environment,
    suite_splits,
)
from agentcredit.envs.tau.options import TauConfig
from agentcredit.plugins import NameCollision, load_group


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
        suites._PROVIDERS.pop("my-grid", None)


def test_register_environment_refuses_a_suite_without_splits_and_options_that_are_no_dataclass():
    with pytest.raises(ValueError, match="'grid': .* has no splits; give the suite class"):
        register_environment("grid", object)
    with pytest.raises(TypeError, match="'grid': options must be a dataclass type; got"):
        register_environment("grid", type("S", (), {"splits": ("train",)}), options=dict)


class Grid:
    splits = ("train",)
    validation_splits = ("train",)


@pytest.fixture
def registry(monkeypatch):
    """The environment registry, restored after the test."""
    monkeypatch.setattr(suites, "_SPECS", dict(suites._SPECS))
    monkeypatch.setattr(suites, "_PROVIDERS", dict(suites._PROVIDERS))


def test_a_built_in_environment_registered_again_is_refused_naming_both_providers(registry):
    with pytest.raises(NameCollision) as refused:
        register_environment("alfworld", Grid)
    assert str(refused.value) == (
        "environment 'alfworld' is registered twice: first by agentcredit's built-in "
        "agentcredit.envs.suites.AlfWorldSuite, then by module tests.envs.test_suites.Grid; "
        "rename the second one's environment (its register_environment('alfworld', ...) call) "
        "and select it with env=NEW_NAME")
    assert environment_spec("alfworld").suite is AlfWorldSuite  # the built-in kept


def test_the_provider_of_an_environment_may_register_it_again(registry):
    register_environment("grid", Grid)
    spec = register_environment("grid", Grid, max_steps=3)  # its module imported anew
    assert environment_spec("grid") is spec and spec.max_steps == 3


def _plugin(root, name: str, module: str, entry: str, registers: str) -> None:
    """A distribution ``name`` whose entry point ``entry`` imports ``module``, which registers
    the environment ``registers``."""
    (root / f"{module}.py").write_text(textwrap.dedent(f"""
        from agentcredit.envs.suites import register_environment


        class Suite:
            splits = ("train",)
            validation_splits = ("train",)


        register_environment({registers!r}, Suite)
        """))
    info = root / f"{name.replace('-', '_')}-0.1.dist-info"  # as a wheel names it
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[agentcredit.test_envs]\n{entry} = {module}\n")


def test_two_plugins_registering_one_environment_are_refused_naming_both_packages(
        registry, tmp_path, monkeypatch):
    # the same entry-point name in both: neither is dropped unseen
    _plugin(tmp_path, "doors-a", "doors_a", "doors", "doors")
    _plugin(tmp_path, "doors-b", "doors_b", "doors", "doors")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(NameCollision) as refused:
            load_group("agentcredit.test_envs")
    finally:
        plugins.reset("agentcredit.test_envs")
    assert str(refused.value) == (
        "environment 'doors' is registered twice: first by plug-in package 'doors-a' (entry "
        "point doors = doors_a in agentcredit.test_envs), then by plug-in package 'doors-b' "
        "(entry point doors = doors_b in agentcredit.test_envs); rename the second one's "
        "environment (its register_environment('doors', ...) call) and select it with "
        "env=NEW_NAME")
    assert environment_spec("doors").suite.__module__ == "doors_a"
