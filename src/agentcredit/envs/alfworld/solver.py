"""ALFWorld's solver truth for the credit check (docs/credit_check.md §5): the demonstrator
(``expert.py``) finishing from the state a prefix leads to, knowing only what it showed."""

from __future__ import annotations

import random
from collections.abc import Sequence

from agentcredit.envs.alfworld.expert import next_action, observe_step, start_episode
from agentcredit.envs.base import ReplayMismatch, Task


def distance_to_finish(env, task: Task, prefix: Sequence[str], cap: int,
                       rng: random.Random | None = None,
                       observations: Sequence[str] | None = None) -> int:
    """Steps the demonstrator needs to win ``task`` from the state ``prefix`` leads to, knowing
    only what the prefix showed (the solver truth's ``d(s)``, docs/credit_check.md).

    Resets ``env``, plays ``prefix`` (a policy's actions: the invalid ones change nothing and
    teach nothing), then lets the demonstrator finish. 0 when the prefix already won; ``cap``
    when the demonstrator gets stuck or needs ``cap`` steps or more. ``rng`` breaks its ties.

    Raises:
        ReplayMismatch: ``observations`` (the text after each prefix action, as recorded) differ
            from what the replay shows.
    """
    obs, k, types = start_episode(env, task, rng)
    for t, action in enumerate(prefix):
        obs, _, _, info = env.step(action)
        if observations is not None and obs.text != observations[t]:
            raise ReplayMismatch(task.task_id, t, observations[t], obs.text)
        if info.won:
            return 0
        if info.valid:
            observe_step(k, action, obs.text, set(obs.admissible_actions))
    for n in range(cap):
        admissible = set(obs.admissible_actions)
        label = next_action(k, task.task_type, types, admissible)
        if label is None or label not in admissible:
            return cap
        obs, _, _, info = env.step(label)
        if info.won:
            return min(n + 1, cap)
        observe_step(k, label, obs.text, set(obs.admissible_actions))
    return cap
