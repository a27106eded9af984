"""What an update logs about its rollouts: ``rollout_metrics`` (reward, success, invalid-action
rate, episode length, the environment's own metrics), and ``env_metric_means``, which the
evaluation also uses for its ``eval/{split}/env/`` figures."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from agentcredit.rollout.records import Trajectory


def rollout_metrics(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """Reward, success, invalid-action rate and episode length of a batch of rollouts, and
    the environment's metrics (``rollout/env/{name}``, ``env_metric_means``).

    ``rollout/reward`` and ``rollout/success`` are means over the rollouts,
    ``rollout/invalid_rate`` the invalid share of all their steps, ``rollout/episode_length``
    the mean steps per rollout and ``rollout/steps`` the total.
    """
    num_steps = sum(len(t.steps) for t in trajectories)
    return {
        "rollout/reward": sum(t.total_reward for t in trajectories) / len(trajectories),
        "rollout/success": sum(t.won for t in trajectories) / len(trajectories),
        "rollout/invalid_rate": sum(t.num_invalid for t in trajectories) / num_steps,
        "rollout/episode_length": num_steps / len(trajectories),
        "rollout/steps": float(num_steps),
        **env_metric_means(trajectories, "rollout/env/"),
    }


def env_metric_means(trajectories: Sequence[Trajectory], prefix: str) -> dict[str, float]:
    """``{prefix}{name}``: each metric the environment reported (``Trajectory.env_metrics``),
    averaged over the trajectories that report it; a name no trajectory reports is absent.

    Only reporters count because an environment reports what applies to a task (tau: the
    ``communicate`` component only for tasks whose reward basis has it).
    """
    values: dict[str, list[float]] = defaultdict(list)
    for trajectory in trajectories:
        for name, value in trajectory.env_metrics.items():
            values[name].append(float(value))
    return {f"{prefix}{name}": float(sum(values[name])) / len(values[name])
            for name in sorted(values)}
