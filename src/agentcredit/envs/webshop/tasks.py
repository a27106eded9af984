"""WebShop tasks by split, on the embedded generated catalog (the default) or any catalog spec.

A task's ``task_type`` is its target's category (``beauty``, ``food``,
``fashion``, ``furniture``, ``electronics``: the skill provider's lookup key)
and its payload carries the catalog spec and the goal, both plain JSON.
Splits are by goal, as WebShop's: the goals are shuffled once, the first
``test_goals`` are ``test``, the next ``valid_goals`` ``valid``, the rest
``train``; a product may be the target of goals in several splits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from agentcredit.envs.base import Task
from agentcredit.envs.webshop.goals import Goal, sample_goals, split_goals
from agentcredit.envs.webshop.options import WebShopConfig
from agentcredit.envs.webshop.shop import open_shop

SPLITS = ("train", "valid", "test")


def goal_tasks(goals: Sequence[Goal], split: str, catalog_spec: Mapping[str, Any],
               prefix: str = "webshop") -> list[Task]:
    """One task per goal, ids ``<prefix>-<split>-<index>``."""
    return [Task(task_id=f"{prefix}-{split}-{i:05d}", env="webshop", split=split,
                 instruction=goal.instruction_text, task_type=goal.category,
                 payload={"catalog": dict(catalog_spec), "goal": goal.to_json()})
            for i, goal in enumerate(goals)]


@lru_cache(maxsize=8)
def _splits(config: WebShopConfig) -> dict[str, list[Goal]]:
    catalog = open_shop(config.catalog_spec()).catalog
    goals = sample_goals(catalog, config.goals_per_product, config.seed)
    return split_goals(goals, config.valid_goals, config.test_goals, config.seed)


def build_tasks(split: str, config: WebShopConfig = WebShopConfig()) -> list[Task]:
    """The tasks of ``split`` (``train``, ``valid`` or ``test``) of the generated WebShop."""
    if split not in SPLITS:
        raise ValueError(f"unknown WebShop split {split!r}; expected one of {SPLITS}")
    return goal_tasks(_splits(config)[split], split, config.catalog_spec())
