"""The ``env`` section: which environment a run uses, its task counts and its options.

``env=NAME`` (long form ``env.name=NAME``) selects a registered environment
(``envs.suites``): ``alfworld``, ``webshop``, ``searchqa``, ``tau-retail`` or ``tau-airline``.
The game counts every environment reads stay at ``env.*``; each environment's own options
live under its own key, ``env.alfworld.*``, ``env.webshop.*``, ``env.searchqa.*`` and
``env.tau.*`` (both tau domains share ``TauConfig``). A config may hold the options of
several environments (a preset's ALFWorld settings stay when ``env=webshop`` selects WebShop);
the suite gets the selected environment's, and a resolved config holds only those.

The keys of the earlier flat layout (``MOVED_KEYS``) are refused with their new name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from agentcredit.config.schema import ConfigError, validate
from agentcredit.envs.alfworld.options import AlfWorldConfig
from agentcredit.envs.searchqa.options import SearchQAConfig
from agentcredit.envs.suites import EnvSuite, GamesPerType, build_env_suite
from agentcredit.envs.tau.options import TauConfig
from agentcredit.envs.webshop.options import WebShopConfig

#: old dotted key (or key prefix) -> the key that holds it now
MOVED_KEYS = {"env.generator": "env.alfworld.generator", "env.cache_dir": "env.alfworld.cache_dir"}


@dataclass
class EnvConfig:
    """The environment and its task sets."""

    name: str = "alfworld"
    """Environment suite: ``alfworld``, ``webshop``, ``searchqa``, ``tau-retail`` or
    ``tau-airline`` (``envs.suites``); ``env=NAME`` is short for ``env.name=NAME``."""
    train_games_per_type: int = 20
    """Generated train games per task type (6 types)."""
    valid_games_per_type: int = 4
    """Generated games per task type in each validation split."""
    pool_games_per_type: int = 0
    """The RL pool: RL draws its tasks only from this many train games per task type (all of a
    type's games when it has fewer), drawn from the train games with ``run.seed``
    (``train.build.draw_pool``) and evaluated as the
    split ``pool``; SFT still clones every train game. 0 = no pool, RL draws from every train
    game."""
    alfworld: AlfWorldConfig = field(default_factory=AlfWorldConfig)
    """ALFWorld (``env=alfworld``): how games are generated and where they are cached."""
    webshop: WebShopConfig = field(default_factory=WebShopConfig)
    """WebShop (``env=webshop``): the generated catalog and goals (``train``/``valid``/``test``
    goals)."""
    searchqa: SearchQAConfig = field(default_factory=SearchQAConfig)
    """Search QA (``env=searchqa``): the generated world and questions or FlashRAG data,
    retrieval, turn limit."""
    tau: TauConfig = field(default_factory=TauConfig)
    """tau2-bench (``env=tau-retail``, ``env=tau-airline``): the agent's instruction, the user,
    the judge."""

    #: environment name -> the field holding its options; other registered environments (the
    #: tests' in-memory one) take none
    OPTIONS_KEYS: ClassVar[dict[str, str]] = {
        "alfworld": "alfworld", "webshop": "webshop", "searchqa": "searchqa",
        "tau-retail": "tau", "tau-airline": "tau"}

    _limits: ClassVar[dict[str, tuple]] = {"train_games_per_type": (1, None),
                                           "valid_games_per_type": (1, None),
                                           "pool_games_per_type": (0, None)}

    def __post_init__(self) -> None:
        validate(self)

    @property
    def options(self) -> Any:
        """The selected environment's options (``env.alfworld`` for ``env=alfworld``), or
        ``None`` for an environment that takes none."""
        key = self.OPTIONS_KEYS.get(self.name)
        return getattr(self, key) if key else None

    @property
    def unselected_options(self) -> list[str]:
        """The options sections of the environments not selected: a resolved config
        (``config_to_dict``, a run's ``config.yaml``, ``config --show``) leaves them out."""
        chosen = self.OPTIONS_KEYS.get(self.name)
        return [key for key in dict.fromkeys(self.OPTIONS_KEYS.values()) if key != chosen]

    def build_suite(self) -> EnvSuite:
        """The selected environment's suite, built on its options and game counts."""
        games = GamesPerType(train=self.train_games_per_type, valid=self.valid_games_per_type)
        return build_env_suite(self.name, self.options, games)


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
