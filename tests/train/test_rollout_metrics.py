"""What an update logs about its rollouts (``train/rollout_metrics.py``), on hand-built
trajectories: means over rollouts, the invalid share of all steps, and each environment metric
averaged over the rollouts that report it."""

from __future__ import annotations

from agentcredit.envs.base import Task
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.rollout_metrics import env_metric_means, rollout_metrics

TASK = Task(task_id="t", env="toy", split="train", instruction="act", task_type="k", payload={})


def step(reward: float, valid: bool = True) -> Step:
    return Step(observation="o", response="a", action="a" if valid else None, valid=valid,
                reward=reward, anchor_key="o", snapshot={}, prompt_ids=[1], response_ids=[2],
                sampling_logprobs=[-0.1])


def test_rollout_metrics_average_over_rollouts_and_count_invalid_steps_over_all_steps():
    won = Trajectory(TASK, 0, [step(0.0), step(10.0)], won=True, env_metrics={"db": 1.0})
    lost = Trajectory(TASK, 0, [step(-0.1, valid=False), step(0.0), step(-0.1, valid=False),
                                step(0.0)], env_metrics={"db": 0.0, "communicate": 1.0})
    metrics = rollout_metrics([won, lost])
    assert metrics == {
        "rollout/reward": (10.0 + -0.2) / 2,          # returns 10 and −0.2
        "rollout/success": 0.5,                       # one of two won
        "rollout/invalid_rate": 2 / 6,                # two invalid of the six steps
        "rollout/episode_length": 3.0,                # (2 + 4) / 2
        "rollout/steps": 6.0,
        "rollout/env/communicate": 1.0,               # only the lost rollout reports it
        "rollout/env/db": 0.5,                        # (1 + 0) / 2
    }


def test_an_environment_metric_no_rollout_reports_is_absent():
    silent = Trajectory(TASK, 0, [step(0.0)])
    assert env_metric_means([silent, silent], "rollout/env/") == {}
    assert "rollout/env/db" not in rollout_metrics([silent])
