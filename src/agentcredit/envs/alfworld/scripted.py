"""The ALFWorld planner of the scripted policies (``rollout.scripted``): the partially-observable
demonstrator (``expert``), which already re-plans from what the episode showed; ``rng`` breaks
its ties. Wrong actions: every other admissible command but ``help`` / ``look`` /
``inventory`` (as ``expert.noisy_demonstration`` draws them)."""

from __future__ import annotations

import random

from agentcredit.envs.alfworld.expert import IDLE_COMMANDS, next_action, observe_step, start_episode
from agentcredit.envs.base import Observation, StepInfo, Task


class AlfWorldPlanner:
    """See the module notes."""

    def __init__(self, task: Task, knowledge, types: dict[str, str]):
        self.task, self.k, self.types = task, knowledge, types

    def expert(self, observation: Observation) -> str | None:
        admissible = set(observation.admissible_actions)
        label = next_action(self.k, self.task.task_type, self.types, admissible)
        return label if label in admissible else None

    def wrong(self, observation: Observation, expert: str | None) -> list[str]:
        return sorted(a for a in observation.admissible_actions
                      if a != expert and a not in IDLE_COMMANDS)

    def observe(self, action: str, observation: Observation, info: StepInfo) -> None:
        if info.valid:
            observe_step(self.k, action, observation.text, set(observation.admissible_actions))


def start(env, task: Task, rng: random.Random) -> tuple[AlfWorldPlanner, Observation]:
    """``rollout.scripted.PlannerStart`` of ALFWorld."""
    obs, knowledge, types = start_episode(env, task, rng)
    return AlfWorldPlanner(task, knowledge, types), obs
