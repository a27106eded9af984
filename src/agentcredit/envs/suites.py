"""Environment suites: from an environment's name and options to task lists and instances,
and everything else an environment offers (docs/extending.md, "Write an environment").

The trainer asks a suite for the tasks of a split and for fresh environment
instances (one per concurrent rollout); it never imports an environment
package itself. ``build_env_suite(name, options, games)`` takes plain values, the
environment's options dataclass (``AlfWorldConfig``, ``WebShopConfig``, …) and the games per
task type, so this module knows no run config.

``register_environment`` registers an environment with its hooks (``EnvironmentSpec``): the
options dataclass and its config key, the credit check's solver, the scripted planner, the
probe's action words, the step limit of a verl launch. The built-ins below register through
it exactly as a plug-in package does from its ``agentcredit.environments`` entry point
(``plugins.py``); no other module names an environment. Hooks that live beside an engine are
``"package.module:name"`` references, imported when used, so registering imports no engine.
A name is registered by one provider only: a plug-in registering ``alfworld`` again, or two
plug-ins one name, is refused (``plugins.NameCollision``) naming both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentcredit.envs.alfworld.options import AlfWorldConfig
from agentcredit.envs.base import Environment, Task
from agentcredit.envs.searchqa.options import SearchQAConfig
from agentcredit.envs.tau.options import TauConfig
from agentcredit.envs.webshop.options import WebShopConfig
from agentcredit.plugins import (
    ENVIRONMENTS,
    NameCollision,
    load_group,
    load_reference,
    provider,
)


class EnvSuite(Protocol):
    """Tasks by split, and a factory of independent environment instances."""

    splits: tuple[str, ...]
    """Every split ``tasks`` accepts."""
    validation_splits: tuple[str, ...]
    """The splits evaluated when ``eval.splits`` is empty."""

    def tasks(self, split: str) -> list[Task]:
        """The tasks of ``split`` (``train``, ``valid_seen``, ``valid_unseen``), in a fixed
        order."""

    def make_env(self) -> Environment:
        """A new environment instance, independent of every other one.

        A suite that caches what it builds on disk also has ``cache_note() -> str | None``:
        one line naming what its ``tasks`` calls read back and from where (None when
        nothing was)."""


@dataclass(frozen=True)
class GamesPerType:
    """How many games of each task type a suite that generates its games makes per split."""

    train: int
    """Games per task type in the ``train`` split."""
    valid: int
    """Games per task type in each validation split."""


@dataclass(frozen=True)
class EnvironmentSpec:
    """A registered environment and its hooks.

    Attributes:
        name: ``env.name``.
        suite: the suite class, ``suite(options, games) -> EnvSuite``; its ``splits`` class
            attribute lists the splits it serves.
        options: the options dataclass (``None``: the environment takes none); it must import
            no engine, since the config imports it.
        options_key: the config key of the options, ``env.<options_key>.*`` (environments may
            share one: both tau domains read ``env.tau``); defaults to ``name`` with ``-`` as
            ``_``.
        options_doc: the line ``config --list`` prints for ``env.<options_key>``.
        solver: ``"module:function"`` (or the function), the credit check's solver distance
            (``train/evaluation/credit_check/truths.py``, ``DistanceFn``), or ``None``.
        solver_refusal: ``"module:function"``, ``options -> reason | None`` why the solver
            truth does not apply under the options, or ``None``.
        planner: ``"module:start"``, the scripted planner of the credit check's regimes
            (``regimes.PlannerStart``), or ``None``.
        action_words: the command words of the environment's actions (the probe gap splits
            action tokens from object tokens with them); empty: no probe gap.
        max_steps: the step limit of a verl launch (``rollout.max_steps``), or ``None``: the
            launch refuses the environment.
        verl_methods: per launch METHOD, the agentcredit settings that replace the launch's
            default ones for this environment (WebShop's ADRS preset).
    """

    name: str
    suite: type
    options: type | None = None
    options_key: str | None = None
    options_doc: str = ""
    solver: str | None = None
    solver_refusal: str | None = None
    planner: str | None = None
    action_words: frozenset[str] = frozenset()
    max_steps: int | None = None
    verl_methods: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def config_key(self) -> str | None:
        """The options' key under ``env`` (``None`` without options)."""
        if self.options is None:
            return None
        return self.options_key or self.name.replace("-", "_")

    def hook(self, name: str) -> Any:
        """The hook ``name`` (``solver``, ``solver_refusal``, ``planner``), loaded when it is a
        ``"module:name"`` reference, or ``None`` when the environment has none."""
        reference = getattr(self, name)
        if not isinstance(reference, str):
            return reference
        return load_reference(reference, f"environment {self.name!r}'s {name}")


_SPECS: dict[str, EnvironmentSpec] = {}
#: per registered name, who registered it (``plugins.provider``)
_PROVIDERS: dict[str, str] = {}


def register_environment(name: str, suite: type, **hooks: Any) -> EnvironmentSpec:
    """Register environment ``name`` with its suite class and hooks (``EnvironmentSpec``'s
    fields); returns the spec. The provider that registered ``name`` may register it again
    (its module imported anew), replacing it; any other is refused.

    Raises:
        NameCollision: ``name`` is registered by another provider (the built-in or an earlier
            plug-in); the line names both and says to rename the new one.
        ValueError: ``name`` is empty, or ``suite`` has no ``splits``.
        TypeError: ``options`` is not a dataclass type, or a hook is not a known field.
    """
    import dataclasses

    if not isinstance(name, str) or not name:
        raise ValueError(f"environment name must be a non-empty string; got {name!r}")
    if not getattr(suite, "splits", None):
        raise ValueError(f"environment {name!r}: {suite!r} has no splits; give the suite class "
                         "a splits tuple (and validation_splits)")
    options = hooks.get("options")
    if options is not None and not (isinstance(options, type)
                                     and dataclasses.is_dataclass(options)):
        raise TypeError(f"environment {name!r}: options must be a dataclass type; got "
                        f"{options!r}")
    by = provider(suite)
    first = _PROVIDERS.get(name, by)
    if first != by:
        raise NameCollision(
            f"environment {name!r} is registered twice: first by {first}, then by {by}; "
            f"rename the second one's environment (its register_environment({name!r}, ...) "
            "call) and select it with env=NEW_NAME")
    if "action_words" in hooks:
        hooks["action_words"] = frozenset(hooks["action_words"])
    spec = EnvironmentSpec(name=name, suite=suite, **hooks)
    _SPECS[name] = spec
    _PROVIDERS[name] = by
    return spec


def update_environment(name: str, **hooks: Any) -> EnvironmentSpec:
    """Set hooks of the registered environment ``name`` (``register_solver`` gives one a
    solver at run time); returns the new spec."""
    from dataclasses import replace

    spec = replace(environment_spec(name), **hooks)
    _SPECS[name] = spec
    return spec


def environment_spec(name: str) -> EnvironmentSpec:
    """The environment registered as ``name`` (plug-ins loaded first); a ``KeyError`` lists
    the known names."""
    load_group(ENVIRONMENTS)
    try:
        return _SPECS[name]
    except KeyError:
        raise KeyError(f"unknown environment {name!r}; known: "
                       f"{', '.join(sorted(_SPECS))}") from None


def environment_specs() -> list[EnvironmentSpec]:
    """Every registered environment in the order they registered: the built-ins, then the
    plug-ins (loaded first)."""
    load_group(ENVIRONMENTS)
    return list(_SPECS.values())


def env_suite_names() -> list[str]:
    """Sorted names of the registered environments (plug-ins loaded first)."""
    return sorted(spec.name for spec in environment_specs())


def suite_splits(name: str) -> tuple[str, ...]:
    """The splits of the environment registered as ``name``."""
    return tuple(environment_spec(name).suite.splits)


def build_env_suite(name: str, options: Any, games: GamesPerType) -> EnvSuite:
    """The suite registered as ``name`` on its ``options`` (``None`` for a suite that takes
    none) and ``games``; a ``KeyError`` lists the known names."""
    return environment_spec(name).suite(options, games)


class AlfWorldSuite:
    """ALFWorld games generated by ``envs.alfworld.generator`` (cached on disk) on the real
    engine."""

    splits = ("train", "valid_seen", "valid_unseen")
    validation_splits = ("valid_seen", "valid_unseen")

    def __init__(self, options, games: GamesPerType):
        self.options = options
        self.games = games
        self.games_read: dict[str, int] = {}
        """Per split, the games that its first ``tasks`` call found already generated in the
        cache (a later call of the split reads what this suite generated or counted)."""

    def tasks(self, split: str) -> list[Task]:
        from agentcredit.envs.alfworld.generator import TASK_TYPES, generate_split, missing_games

        per_type = self.games.train if split == "train" else self.games.valid
        cache = Path(self.options.cache_dir)
        if split not in self.games_read:
            self.games_read[split] = per_type * len(TASK_TYPES) - len(
                missing_games(split, per_type, self.options.generator, cache))
        return generate_split(split, per_type, self.options.generator, cache)

    def cache_note(self) -> str | None:
        """Where the games read back from the cache lie (None when none was)."""
        from agentcredit.envs.alfworld.generator import cache_folder

        read = sum(self.games_read.values())
        if not read:
            return None
        folder = cache_folder(self.options.generator, Path(self.options.cache_dir))
        return (f"games: read {read} generated games from {folder} (a game is a "
                "pure function of the generator's settings; delete the folder to generate "
                "them again)")

    def make_env(self) -> Environment:
        from agentcredit.envs.alfworld.engine import AlfWorldEnv

        return AlfWorldEnv()


register_environment(
    "alfworld", AlfWorldSuite, options=AlfWorldConfig,
    options_doc="ALFWorld (env=alfworld): how games are generated and where they are cached.",
    solver="agentcredit.envs.alfworld.solver:distance_to_finish",
    planner="agentcredit.envs.alfworld.scripted:start",
    action_words=("go", "to", "take", "from", "move", "put", "in", "on", "in/on", "open",
                  "close", "heat", "cool", "clean", "slice", "with", "use", "toggle",
                  "examine", "look", "inventory", "help"),
    max_steps=50)


class WebShopSuite:
    """The generated WebShop (``envs.webshop``): goals split into ``train``, ``valid``, ``test``."""

    splits = ("train", "valid", "test")
    validation_splits = ("valid",)

    def __init__(self, options, games: GamesPerType):
        self.options = options

    def tasks(self, split: str) -> list[Task]:
        from agentcredit.envs.webshop.tasks import build_tasks

        return build_tasks(split, self.options)

    def make_env(self) -> Environment:
        from agentcredit.envs.webshop.engine import WebShopEnv

        return WebShopEnv()


register_environment(
    "webshop", WebShopSuite, options=WebShopConfig,
    options_doc="WebShop (env=webshop): the generated catalog and goals (train/valid/test "
                "goals).",
    solver="agentcredit.envs.webshop.solver:distance_to_buy",
    planner="agentcredit.envs.webshop.scripted:start", max_steps=15,
    verl_methods={"adrs": ("method=adrs_webshop", "credit.options.backbone=gigpo")})


class SearchQASuite:
    """Search QA (``envs.searchqa``): generated questions over a generated world, or a FlashRAG
    dataset; splits ``train``, ``valid``, ``test`` (by entity)."""

    splits = ("train", "valid", "test")
    validation_splits = ("valid",)

    def __init__(self, options, games: GamesPerType):
        self.options = options

    def tasks(self, split: str) -> list[Task]:
        from agentcredit.envs.searchqa.tasks import build_tasks

        return build_tasks(split, self.options)

    def make_env(self) -> Environment:
        from agentcredit.envs.searchqa.engine import SearchQAEnv

        qa = self.options
        return SearchQAEnv(max_turns=qa.max_turns, topk=qa.topk,
                           max_query_chars=qa.max_query_chars, answer_scope=qa.answer_scope)


register_environment(
    "searchqa", SearchQASuite, options=SearchQAConfig,
    options_doc="Search QA (env=searchqa): the generated world and questions or FlashRAG "
                "data, retrieval, turn limit.",
    solver="agentcredit.envs.searchqa.solver:distance_to_answer",
    solver_refusal="agentcredit.envs.searchqa.solver:solver_refusal",
    planner="agentcredit.envs.searchqa.scripted:start")


class TauSuite:
    """tau2-bench (``envs.tau``) on one domain, from the ``agentcredit[tau]`` packages: tau2's
    ``train`` and ``test`` splits, and ``base`` (every task)."""

    splits = ("train", "test", "base")
    validation_splits = ("test",)
    domain = "retail"

    def __init__(self, options, games: GamesPerType):
        self.options = options

    def tasks(self, split: str) -> list[Task]:
        from agentcredit.envs.tau.tasks import build_tasks

        return build_tasks(self.domain, split, self.options)

    def make_env(self) -> Environment:
        from agentcredit.envs.tau.engine import TauEnv

        return TauEnv(self.domain, self.options)


class TauRetailSuite(TauSuite):
    """tau2-bench retail (114 tasks)."""

    domain = "retail"


class TauAirlineSuite(TauSuite):
    """tau2-bench airline (50 tasks)."""

    domain = "airline"


for _name, _suite in (("tau-retail", TauRetailSuite), ("tau-airline", TauAirlineSuite)):
    register_environment(
        _name, _suite, options=TauConfig, options_key="tau",
        options_doc="tau2-bench (env=tau-retail, env=tau-airline): the agent's instruction, "
                    "the user, the judge.",
        solver="agentcredit.envs.tau.solver:distance_to_resolve",
        planner="agentcredit.envs.tau.scripted:start")
