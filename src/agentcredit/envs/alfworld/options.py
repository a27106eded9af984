"""The ALFWorld environment's options (``env.alfworld`` in a run config); importing this loads
no engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from agentcredit.config.schema import SEED_MAX, validate


@dataclass(frozen=True)
class GeneratorConfig:
    """How games are sampled.

    Attributes:
        seed: base seed; a game is a pure function of (seed, split, task type, index).
        max_receptacles: room size cap, 4 to 1,000; larger floor plans keep the receptacles
            a task needs plus a random subset of the rest (None keeps the full layout).
        max_distractor_types: object types placed besides the target (each 1-2 instances),
            at most 1,000 (a room holds far fewer types: the excess places nothing).
        max_plan_length: games whose planner solution is longer are rejected; at most
            10,000 steps, far past any episode's step limit.
        max_attempts: samples tried per game before giving up with an error; at most
            10,000 (the default 200 rarely runs out; each try generates and plans a game).
    """

    _limits: ClassVar[dict[str, tuple]] = {
        "seed": (0, SEED_MAX), "max_receptacles": (4, 1000), "max_distractor_types": (0, 1000),
        "max_plan_length": (1, 10_000), "max_attempts": (1, 10_000)}

    seed: int = 0
    max_receptacles: int | None = None
    max_distractor_types: int = 6
    max_plan_length: int = 40
    max_attempts: int = 200

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class AlfWorldConfig:
    """ALFWorld's options: how games are generated and where they are cached."""

    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    """How games are sampled (room size, distractors, plan length)."""
    cache_dir: str = ".cache/agentcredit/alfworld"
    """Where generated games are cached (shared between runs)."""

    def __post_init__(self) -> None:
        validate(self)
