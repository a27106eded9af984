"""Evaluation: success on the validation splits, overall and per task type (issue 3,
docs/settings.md §6).

One rollout per task at the evaluation temperature (docs/settings.md §6: 0.4), every split
batched into one ``collect`` call. The sampling generator is seeded from the
run seed and the update number only, so an evaluation never consumes the
training random streams and a resumed run evaluates exactly as an
uninterrupted one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from agentcredit.envs.base import Task
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.rollout.records import Trajectory
from agentcredit.skills.provider import SkillProvider
from agentcredit.train.build import load_model, make_collector, validation_tasks
from agentcredit.train.config import TrainConfig


def evaluation_generator(seed: int, update: int) -> torch.Generator:
    """The CPU generator of the evaluation after ``update`` updates."""
    return torch.Generator().manual_seed(seed * 1_000_003 + update + 7919)


def evaluate(
    collector: RolloutCollector,
    tasks_by_split: Mapping[str, Sequence[Task]],
    *,
    temperature: float,
    generator: torch.Generator,
    skills: SkillProvider | None = None,
) -> dict[str, float]:
    """Run one rollout per task and summarise.

    ``skills`` puts each task's skill in its prompts (``eval.skills``: the ``skill_prompt``
    and ``skill_grpo*`` baselines); ``None``, the default, evaluates without skills.

    Returns (``s`` a split, ``k`` a task type): ``eval/success`` (over all
    evaluated tasks), ``eval/{s}/success``, ``eval/{s}/success/{k}``,
    ``eval/{s}/invalid_rate``, ``eval/{s}/episode_length``.
    """
    order = [(split, task) for split, tasks in tasks_by_split.items() for task in tasks]
    trajectories = collector.collect([task for _, task in order], 1, temperature=temperature,
                                     generator=generator, skills=skills)
    by_split: dict[str, list[Trajectory]] = defaultdict(list)
    for (split, _), traj in zip(order, trajectories, strict=True):
        by_split[split].append(traj)
    metrics = {"eval/success": _mean([t.won for t in trajectories])}
    for split, trajs in by_split.items():
        metrics[f"eval/{split}/success"] = _mean([t.won for t in trajs])
        metrics[f"eval/{split}/invalid_rate"] = (sum(t.num_invalid for t in trajs)
                                                 / max(1, sum(len(t.steps) for t in trajs)))
        metrics[f"eval/{split}/episode_length"] = _mean([len(t.steps) for t in trajs])
        by_type: dict[str, list[bool]] = defaultdict(list)
        for t in trajs:
            by_type[t.task.task_type].append(t.won)
        for task_type in sorted(by_type):
            metrics[f"eval/{split}/success/{task_type}"] = _mean(by_type[task_type])
    return metrics


def _mean(values: Sequence[float]) -> float:
    return float(sum(values)) / len(values) if values else 0.0


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Reward, success, invalid-action rate and episode length of a batch of rollouts."""
    num_steps = sum(len(t.steps) for t in trajectories)
    return {
        "rollout/reward": sum(t.total_reward for t in trajectories) / len(trajectories),
        "rollout/success": sum(t.won for t in trajectories) / len(trajectories),
        "rollout/invalid_rate": sum(t.num_invalid for t in trajectories) / num_steps,
        "rollout/episode_length": num_steps / len(trajectories),
        "rollout/steps": float(num_steps),
    }


def evaluate_model(config: TrainConfig, model_dir: Path, update: int = 0) -> dict[str, float]:
    """Evaluate the model in ``model_dir`` on ``config``'s validation splits.

    Uses the run's rollout options (prompt format, step limit), the evaluation
    temperature, ``eval.skills`` and the generator the run itself uses for the
    evaluation after ``update`` updates.
    """
    from agentcredit.train.env_suites import build_env_suite
    from agentcredit.train.privileged import check_skill_texts

    if config.run.threads:
        torch.set_num_threads(config.run.threads)
    model, tokenizer = load_model(config, model_dir)
    suite = build_env_suite(config.env)
    collector = make_collector(config, model, tokenizer, suite)
    tasks = validation_tasks(config, suite)
    skills = None
    if config.eval.skills:
        skills = SkillProvider(config.skills.root or None)
        check_skill_texts(skills, [task for split in tasks.values() for task in split])
    return evaluate(collector, tasks, temperature=config.eval.temperature,
                    generator=evaluation_generator(config.run.seed, update), skills=skills)
