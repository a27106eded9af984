"""Scripted policies of chosen skill ε (docs/credit_check.md §5): the expert's action with
probability 1 − ε, otherwise a plausible wrong action, seeded.

An environment provides a ``Planner``: built on a reset environment, it names the expert's
action in the current state (re-planning from what the episode did so far, so the policy
recovers after a wrong action) and the plausible wrong actions there, and it follows each
step the episode takes (``observe``). ``EpsilonPolicy`` mixes the two; ``play`` runs an
episode from reset, or from a replayed prefix, which is what a Monte Carlo continuation of the
same policy needs (``train.evaluation.credit_check.regimes``).

Each step draws ``u ~ U[0, 1)`` from the episode's rng; the step is wrong when ``u < ε`` and a
wrong action exists, and the wrong action is then drawn uniformly. Where the planner has no
expert action (it is stuck), a wrong action is drawn; with neither, the episode stops.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentcredit.envs.base import Environment, Observation, StepInfo, Task
from agentcredit.rollout.records import Step, Trajectory


class Planner(Protocol):
    """The expert of one episode, re-planning from the state the episode reached."""

    def expert(self, observation: Observation) -> str | None:
        """The expert's action now (``None``: it is stuck)."""

    def wrong(self, observation: Observation, expert: str | None) -> list[str]:
        """Plausible wrong actions now (none equal to ``expert``)."""

    def observe(self, action: str, observation: Observation, info: StepInfo) -> None:
        """Follow the step ``action`` took, which produced ``observation``."""


#: ``start(env, task, rng) -> (planner, first observation)``: resets ``env`` on ``task``.
PlannerStart = Callable[[Environment, Task, random.Random], tuple[Planner, Observation]]


@dataclass(frozen=True)
class EpsilonPolicy:
    """The expert with probability ``1 − epsilon``, else a uniform wrong action (module notes).

    Attributes:
        start: the environment's planner (``PlannerStart``).
        epsilon: ``ε`` in [0, 1].
    """

    start: PlannerStart
    epsilon: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.epsilon <= 1.0:
            raise ValueError(f"EpsilonPolicy: epsilon = {self.epsilon}; it must be in [0, 1]")

    def choose(self, planner: Planner, observation: Observation, rng: random.Random
               ) -> str | None:
        """The action of one step (``None``: no action exists)."""
        expert = planner.expert(observation)
        wrong = [a for a in planner.wrong(observation, expert) if a != expert]
        slip = rng.random() < self.epsilon
        if expert is None or (slip and wrong):
            return rng.choice(wrong) if wrong else None
        return expert


@dataclass(frozen=True)
class Rewards:
    """The collector's rewards (docs/backbones.md §2): ``invalid_penalty`` at an invalid step,
    ``outcome_reward · 1[won]`` at the last."""

    invalid_penalty: float = -0.1
    outcome_reward: float = 10.0


def play(env: Environment, task: Task, policy: EpsilonPolicy, rng: random.Random,
         max_steps: int, prefix: Sequence[str] = (), group_id: int = 0,
         rewards: Rewards = Rewards()) -> Trajectory:
    """One episode of ``policy`` on ``task``, after replaying ``prefix`` (whose steps the
    planner follows but the trajectory does not record); at most ``max_steps`` steps in all.
    The trajectory carries what the credit methods read: rewards, anchor keys (the observation
    before each step), snapshots for VICT's traces."""
    planner, obs = policy.start(env, task, rng)
    done, info = False, StepInfo(True, False)
    for action in prefix:
        after, _, done, info = env.step(action)
        planner.observe(action, after, info)
        obs = after
    traj = Trajectory(task, group_id, initial_snapshot=env.snapshot())
    steps = len(prefix)
    while not done and steps < max_steps:
        action = policy.choose(planner, obs, rng)
        if action is None:
            break
        after, _, done, info = env.step(action)
        planner.observe(action, after, info)
        traj.steps.append(Step(obs.text, action, action, info.valid,
                               0.0 if info.valid else rewards.invalid_penalty, obs.text,
                               env.snapshot(), [], [], [],
                               admissible=tuple(obs.admissible_actions)))
        obs, steps = after, steps + 1
    traj.won = bool(info.won)
    traj.truncated = not done
    traj.final_observation = obs.text
    traj.final_admissible = tuple(obs.admissible_actions)
    traj.outcome_reward = rewards.outcome_reward * float(traj.won)
    if traj.steps:
        traj.steps[-1].reward += traj.outcome_reward
    return traj
