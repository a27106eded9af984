"""Where every update's batch comes from: ``GroupSource`` draws the tasks and plays the groups,
and ``collect_with_signal`` runs DAPO's dynamic sampling over it when it is on.

``method=dapo`` (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at
Scale") is GRPO with DAPO's four changes, each in the module that owns it:

- clip-higher: ``optim.clip_low = 0.2``, ``optim.clip_high = 0.28`` (``train/loss.py``);
- token-level loss: every method here already averages the PPO loss over the valid
  tokens of the whole mini-batch (docs/backbones.md §1), DAPO's aggregation;
- soft overlong punishment, added to each step's reward before credit
  (``credit/overlong.py``: ``rollout.overlong_buffer``, ``rollout.overlong_penalty``);
- dynamic sampling (here): groups whose rollouts all have the same return are dropped and
  new tasks are collected in their place (``rollout.dynamic_sampling_rounds``). The verl
  path refuses it (``integrations/verl/supported.py``).

Dynamic sampling: [choice] "equal rewards" means equal returns ``R_i`` as the estimator sees
them (outcome, invalid-action and overlong penalties; ``shaped_return``), within
``SIGNAL_TOLERANCE``: exactly the groups whose GRPO advantage is 0, so an all-failed group
whose rollouts differ in invalid actions is kept (it still teaches fewer invalid actions).
Each extra round collects as many groups as are still missing, at most
``rounds`` extra rounds. [choice] The update is never empty: if no group with signal
turned up, it trains on the last round's groups (advantage 0 everywhere, so only the
KL term acts), and ``dynamic/empty`` says so.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from agentcredit.credit.overlong import OverlongPenalty, response_lengths
from agentcredit.envs.base import Task
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.rollout.records import Trajectory
from agentcredit.run.random_streams import RandomStreams
from agentcredit.skills import SkillProvider

#: returns closer than this count as equal (the estimator sums float32 step rewards)
SIGNAL_TOLERANCE = 1e-4


def shaped_return(trajectory: Trajectory, overlong: OverlongPenalty) -> float:
    """``R_i`` as the estimator sees it: the trajectory's return plus its steps' overlong
    penalties."""
    return trajectory.total_reward + float(overlong.step_penalties(
        response_lengths([trajectory])).sum())


def has_signal(group: Sequence[Trajectory], overlong: OverlongPenalty) -> bool:
    """Whether the rollouts of one group have different ``shaped_return`` (a non-zero GRPO
    advantage)."""
    values = [shaped_return(t, overlong) for t in group]
    return max(values) - min(values) > SIGNAL_TOLERANCE


def by_group(trajectories: Sequence[Trajectory]) -> list[list[Trajectory]]:
    """The trajectories split into their groups, in order of first appearance."""
    groups: dict[int, list[Trajectory]] = {}
    for trajectory in trajectories:
        groups.setdefault(trajectory.group_id, []).append(trajectory)
    return list(groups.values())


@dataclass
class SampledBatch:
    """What dynamic sampling collected for one update.

    Attributes:
        trajectories: the trajectories to train on (whole groups, in collection order).
        rounds: collection rounds run (1 = no resampling).
        dropped: groups dropped for equal returns.
        empty: no group with signal was found, so ``trajectories`` are the last round's
            equal-return groups.
    """

    trajectories: list[Trajectory]
    rounds: int
    dropped: int
    empty: bool

    def metrics(self) -> dict[str, float]:
        """``dynamic/rounds``, ``dynamic/dropped_groups``, ``dynamic/empty`` for metrics.jsonl."""
        return {"dynamic/rounds": float(self.rounds), "dynamic/dropped_groups": float(self.dropped),
                "dynamic/empty": float(self.empty)}


@dataclass(frozen=True)
class GroupSource:
    """Where an update's groups come from: ``groups`` tasks a round drawn from ``pool`` with
    the run's task stream (without replacement while the pool allows, ``draw_tasks``),
    ``group_size`` rollouts of each played by ``collector`` at ``temperature`` with its token
    stream. It holds no random stream: the learner's (``RandomStreams``) are passed to
    ``collect_with_signal``.

    Attributes:
        collector: plays the rollouts (``rollout.collector.RolloutCollector``); evaluation
            plays with it too.
        pool: the tasks RL draws from.
        group_size: rollouts per task, ``rollout.group_size``.
        temperature: the sampling temperature, ``rollout.temperature``.
        groups: groups per update, ``rollout.tasks_per_update``.
        rounds: extra dynamic-sampling rounds, ``rollout.dynamic_sampling_rounds``.
        overlong: the overlong penalty dynamic sampling judges returns with.
        skills: the skill texts rollout prompts carry, or ``None``.
    """

    collector: RolloutCollector
    pool: Sequence[Task]
    group_size: int
    temperature: float
    groups: int
    rounds: int
    overlong: OverlongPenalty
    skills: SkillProvider | None = None


def draw_tasks(pool: Sequence[Task], count: int, rng: random.Random) -> list[Task]:
    """``count`` tasks of ``pool`` drawn with ``rng``: without replacement while the pool
    holds that many, else with replacement."""
    return rng.sample(pool, count) if count <= len(pool) else rng.choices(pool, k=count)


def collect_with_signal(source: GroupSource, update: int, streams: RandomStreams
                        ) -> SampledBatch:
    """DAPO dynamic sampling of update ``update``'s ``source.groups`` groups: each round's
    tasks drawn with ``streams.task_rng`` (``draw_tasks``), their tokens sampled with
    ``streams.sampling``, round ``r``'s groups numbered from ``round_first_group_id``.

    ``source.rounds = 0`` collects the groups once and keeps them all (sampling off).
    Otherwise groups whose returns (``shaped_return`` with ``source.overlong``) are all
    equal are dropped and the
    missing groups collected again, for at most ``source.rounds`` extra rounds; at most
    ``source.groups`` groups are kept. Never empty (see the module docstring).
    """
    groups, rounds = source.groups, source.rounds
    kept: list[Trajectory] = []
    count = dropped = 0
    for round_index in range(rounds + 1):
        batch = source.collector.collect(
            draw_tasks(source.pool, groups - count, streams.task_rng), source.group_size,
            temperature=source.temperature, generator=streams.sampling,
            first_group_id=round_first_group_id(update, round_index, groups, rounds),
            skills=source.skills)
        if rounds == 0:
            return SampledBatch(batch, rounds=1, dropped=0, empty=False)
        for group in by_group(batch):
            if has_signal(group, source.overlong):
                kept += group
                count += 1
            else:
                dropped += 1
        if count == groups:
            break
    if not kept:
        return SampledBatch(batch, rounds=round_index + 1, dropped=dropped, empty=True)
    return SampledBatch(kept, rounds=round_index + 1, dropped=dropped, empty=False)


def round_first_group_id(update: int, round_index: int, groups: int, rounds: int) -> int:
    """The first group id of collection round ``round_index`` of update ``update`` (1-based).

    Round 0 keeps the ids ``(update − 1)·groups, …`` a run without dynamic sampling uses;
    later rounds take negative ids, a distinct block of ``groups`` per (update, round),
    so no two groups of a run share an id.
    """
    if round_index == 0:
        return (update - 1) * groups
    return -((update - 1) * rounds + round_index) * groups
