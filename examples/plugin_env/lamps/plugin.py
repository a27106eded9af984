"""Registers the environment ``lamps`` (entry point ``agentcredit.environments``).

Importing this module must stay cheap: the config imports it to list ``env.lamps.*``. The
engine is named by text (``"lamps.engine:..."``) and imported only when a suite or the credit
check needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentcredit.config.schema import validate
from agentcredit.envs.suites import GamesPerType, register_environment


@dataclass
class LampsConfig:
    """Options of the lamp panel (``env.lamps.*``)."""

    _limits: ClassVar[dict[str, tuple]] = {"lamps": (2, 12), "seed": (0, 2**32 - 1)}

    lamps: int = 4
    """Lamps on the panel; pressing button k toggles lamps k and k+1."""
    seed: int = 0
    """Seed of the generated start and goal patterns."""

    def __post_init__(self) -> None:
        validate(self)


class LampsSuite:
    """Generated tasks: ``env.train_games_per_type`` train and ``env.valid_games_per_type``
    valid panels."""

    splits = ("train", "valid")
    validation_splits = ("valid",)

    def __init__(self, options: LampsConfig, games: GamesPerType) -> None:
        self.options, self.games = options, games

    def tasks(self, split: str):
        from lamps.engine import make_tasks

        count = self.games.train if split == "train" else self.games.valid
        return make_tasks(split, count, self.options)

    def make_env(self):
        from lamps.engine import LampsEnv

        return LampsEnv()


register_environment(
    "lamps", LampsSuite, options=LampsConfig,
    options_doc="Lamp panel (env=lamps): how many lamps, the seed of the patterns.",
    solver="lamps.engine:presses_left", action_words=("press",), max_steps=12)
