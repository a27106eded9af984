"""The ``env`` section: which environment a run uses, its task counts and its options.

``env=NAME`` (long form ``env.name=NAME``) selects a registered environment
(``envs.suites``, built-ins and plug-ins alike). The game counts every environment reads stay
at ``env.*``; each environment's own options live under its own key (``EnvironmentSpec.
config_key``): ``env.alfworld.*``, ``env.webshop.*``, ``env.searchqa.*``, ``env.tau.*`` (both
tau domains share ``TauConfig``), and a plug-in's under its name. ``EnvConfig`` is therefore
built from the registry when this module is imported (``env_config_class``): the common
fields of ``EnvSection`` plus one options field per key, so ``config --list``, ``config
--show`` and a misspelt key name a plug-in's options as they name the built-ins'. A config
may hold the options of several environments (a preset's ALFWorld settings stay when
``env=webshop`` selects WebShop); the suite gets the selected environment's, and a resolved
config holds only those.

The keys of the earlier flat layout (``MOVED_KEYS``) are refused with their new name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from typing import Any, ClassVar

from agentcredit.config.schema import ConfigError, validate
from agentcredit.envs.suites import (
    EnvSuite,
    GamesPerType,
    build_env_suite,
    environment_spec,
    environment_specs,
)

#: old dotted key (or key prefix) -> the key that holds it now; remove after 2026-12-30, four
#: weeks after 4c2ae9a (2026-12-02) moved these keys, when no config still uses them
MOVED_KEYS = {"env.generator": "env.alfworld.generator", "env.cache_dir": "env.alfworld.cache_dir"}
GAMES_MAX = 10_000
#: the evaluation split that plays the RL pool's games (``env.pool_games_per_type``;
#: ``train.build.rl_tasks`` draws them)
POOL = "pool"
"""Most generated games per task type and split (each takes seconds to build and plan)."""


@dataclass
class EnvSection:
    """The environment and its task sets (the fields every environment shares)."""

    name: str = "alfworld"
    """Environment: a registered name (``envs.suites``; ``EnvConfig`` lists them);
    ``env=NAME`` is short for ``env.name=NAME``."""
    train_games_per_type: int = 20
    """Generated train games per task type (6 types); at most 10,000."""
    valid_games_per_type: int = 4
    """Generated games per task type in each validation split; at most 10,000."""
    pool_games_per_type: int = 0
    """The RL pool: RL draws its tasks only from this many train games per task type (all of a
    type's games when it has fewer), drawn from the train games with ``run.seed``
    (``train.build.draw_pool``) and evaluated as the
    split ``pool``; SFT still clones every train game. 0 = no pool, RL draws from every train
    game."""

    _limits: ClassVar[dict[str, tuple]] = {"train_games_per_type": (1, GAMES_MAX),
                                           "valid_games_per_type": (1, GAMES_MAX),
                                           "pool_games_per_type": (0, GAMES_MAX)}

    def __post_init__(self) -> None:
        validate(self)

    @property
    def options(self) -> Any:
        """The selected environment's options (``env.alfworld`` for ``env=alfworld``), or
        ``None`` for an environment that takes none. An environment registered after this
        module was imported has no field here and gets its options' defaults."""
        spec = environment_spec(self.name)
        key = spec.config_key
        if key is None:
            return None
        return getattr(self, key) if hasattr(self, key) else spec.options()

    @property
    def unselected_options(self) -> list[str]:
        """The options sections of the environments not selected: a resolved config
        (``config_to_dict``, a run's ``config.yaml``, ``config --show``) leaves them out."""
        chosen = environment_spec(self.name).config_key
        return [key for key in options_sections() if key != chosen]

    def build_suite(self) -> EnvSuite:
        """The selected environment's suite, built on its options and game counts."""
        games = GamesPerType(train=self.train_games_per_type, valid=self.valid_games_per_type)
        return build_env_suite(self.name, self.options, games)


def options_sections() -> dict[str, tuple[type, str]]:
    """Options key -> (options dataclass, doc line) over the registered environments."""
    sections: dict[str, tuple[type, str]] = {}
    for spec in environment_specs():
        if spec.config_key is not None:
            sections.setdefault(spec.config_key, (spec.options, spec.options_doc))
    return sections


def env_config_class() -> type:
    """``EnvSection`` plus one field per registered options key, each defaulting to its
    dataclass's defaults; the fields' doc lines are the environments' ``options_doc``, and
    ``name``'s lists the registered environments."""
    sections = options_sections()
    names = ", ".join(spec.name for spec in environment_specs())
    docs = {"name": f"Environment: {names} (envs.suites; plug-ins included); env=NAME is "
                    "short for env.name=NAME.",
            **{key: doc for key, (_, doc) in sections.items()}}
    return make_dataclass(
        "EnvConfig",
        [(key, options, field(default_factory=options)) for key, (options, _) in
         sections.items()],
        bases=(EnvSection,),
        namespace={"FIELD_DOCS": docs,
                   "__doc__": EnvSection.__doc__, "__module__": __name__})


EnvConfig = env_config_class()


def refuse_moved_keys(data: dict) -> None:
    """Refuse a key of the earlier ``env`` layout in the nested plain ``data`` of a run config
    (a YAML file with overrides applied), naming the key that holds it now.

    Raises:
        ConfigError: ``"env.generator.seed moved: use env.alfworld.generator.seed"``.
    """
    for old, new in MOVED_KEYS.items():
        node: Any = data
        for part in old.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            leaf = _first_leaf(node)
            raise ConfigError(f"{old}{leaf} moved: use {new}{leaf}")


def _first_leaf(node: Any) -> str:
    """``".a.b"`` for ``{"a": {"b": 1}}``: the dotted path to the first value under ``node``."""
    path = ""
    while isinstance(node, dict) and node:
        key, node = next(iter(node.items()))
        path += f".{key}"
    return path
