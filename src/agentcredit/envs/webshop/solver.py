"""WebShop's solver truth for the credit check (docs/credit_check.md §5): ``distance_to_buy``,
the steps the scripted planner (``scripted.py``) needs from the replayed state, ``cap`` when it
loses."""

from __future__ import annotations

import random
from collections.abc import Sequence

from agentcredit.envs.base import ReplayMismatch, Task
from agentcredit.envs.webshop.scripted import start


def distance_to_buy(env, task: Task, prefix: Sequence[str], cap: int,
                    rng: random.Random | None = None,
                    observations: Sequence[str] | None = None) -> int:
    """Steps the planner needs to buy the target from the state ``prefix`` leads to (module
    notes); 0 when the prefix won, ``cap`` when it lost or the planner cannot win in time."""
    planner, obs = start(env, task, random.Random(0))
    for t, action in enumerate(prefix):
        obs, _, done, info = env.step(action)
        if observations is not None and obs.text != observations[t]:
            raise ReplayMismatch(task.task_id, t, observations[t], obs.text)
        if done:
            return 0 if info.won else cap
    for n in range(cap):
        action = planner.expert(obs)
        if action is None:
            return cap
        obs, _, done, info = env.step(action)
        if done:
            return min(n + 1, cap) if info.won else cap
    return cap
