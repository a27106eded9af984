"""The lamp panel: tasks, the environment, its Level-0 verifier and its solver.

A panel has ``n`` lamps; ``press k`` toggles lamps ``k`` and ``k+1`` (the last button only
its own lamp). A task asks for a goal pattern from a start pattern; every pattern is
reachable, and the presses that reach it are unique up to order (a press twice undoes
itself), so the fewest presses left is exact: walk the lamps left to right and press
wherever the lamp differs from the goal.
"""

from __future__ import annotations

import random
from typing import Any

from agentcredit.envs.base import Observation, ReplayMismatch, StepInfo, Task
from agentcredit.verifier.goal import Goal, goal_verifier


def make_tasks(split: str, count: int, options) -> list[Task]:
    """``count`` panels of ``split``, each start different from its goal."""
    rng = random.Random(f"{options.seed}/{split}")
    tasks = []
    for i in range(count):
        start = [rng.random() < 0.5 for _ in range(options.lamps)]
        goal = list(start)
        while goal == start:
            goal = [rng.random() < 0.5 for _ in range(options.lamps)]
        tasks.append(Task(task_id=f"lamps-{split}-{i}", env="lamps", split=split,
                          instruction=f"make the lamps show {_pattern(goal)}",
                          task_type="panel", payload={"start": start, "goal": goal}))
    return tasks


def _pattern(lamps: list[bool]) -> str:
    return " ".join("on" if on else "off" for on in lamps)


def plan(lamps: list[bool], goal: list[bool]) -> list[str]:
    """The fewest presses from ``lamps`` to ``goal``, left to right."""
    lamps, presses = list(lamps), []
    for k in range(len(lamps)):
        if lamps[k] != goal[k]:
            presses.append(f"press {k + 1}")
            lamps[k] = not lamps[k]
            if k + 1 < len(lamps):
                lamps[k + 1] = not lamps[k + 1]
    return presses


class LampsEnv:
    """The environment protocol (``agentcredit.envs.base.Environment``) over one panel."""

    name = "lamps"

    def reset(self, task: Task) -> Observation:
        self.task, self.lamps = task, list(task.payload["start"])
        return Observation(self._text(), self.admissible_actions())

    @property
    def won(self) -> bool:
        return self.lamps == self.task.payload["goal"]

    def _text(self) -> str:
        return f"The lamps show {_pattern(self.lamps)}."

    def admissible_actions(self) -> tuple[str, ...]:
        return () if self.won else tuple(f"press {k + 1}" for k in range(len(self.lamps)))

    def step(self, action_text: str) -> tuple[Observation, float, bool, StepInfo]:
        action = action_text.strip()
        if action not in self.admissible_actions():  # a bad action is answered, not raised
            return (Observation("Nothing happens.", self.admissible_actions()),
                    float(self.won), self.won, StepInfo(valid=False, won=self.won))
        k = int(action.split()[1]) - 1
        for j in (k, k + 1):
            if j < len(self.lamps):
                self.lamps[j] = not self.lamps[j]
        return (Observation(self._text(), self.admissible_actions()), float(self.won),
                self.won, StepInfo(valid=True, won=self.won))

    def snapshot(self) -> dict[str, Any]:
        return {f"lamp:{k + 1}": on for k, on in enumerate(self.lamps)}

    def verifier(self, task: Task):
        """Level 0 from the goal state: each lamp that must change equals its goal, and no
        other lamp differs from the start at the end (``verifier/goal.py``)."""
        start, goal = task.payload["start"], task.payload["goal"]
        initial = {f"lamp:{k + 1}": on for k, on in enumerate(start)}
        wanted = {f"lamp:{k + 1}": on for k, on in enumerate(goal) if on != start[k]}
        return goal_verifier(task.task_id, Goal(equal=wanted, unchanged=("lamp:",)), initial,
                             env="lamps")

    def expert(self, task: Task) -> list[str]:
        return plan(task.payload["start"], task.payload["goal"])


def presses_left(env: LampsEnv, task: Task, prefix, cap: int, rng, observations) -> int:
    """The credit check's solver distance: replay ``prefix``, then count the fewest presses
    to the goal (at most ``cap``)."""
    env.reset(task)
    for t, action in enumerate(prefix):
        obs, _, _, _ = env.step(action)
        if obs.text != observations[t]:
            raise ReplayMismatch(task.task_id, t, observations[t], obs.text)
    return min(len(plan(env.lamps, task.payload["goal"])), cap)
