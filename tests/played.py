"""``played``: the trajectory a list of actions makes in an environment, recorded as the
collector records it, for the credit truths' tests
(``tests/train/evaluation/credit_check/test_truths.py``, ``tests/envs/*/test_solver.py``)."""

from __future__ import annotations

from agentcredit.envs.base import Environment, Task
from agentcredit.rollout.records import Step, Trajectory


def played(env: Environment, task: Task, actions: list[str], group_id: int = 0) -> Trajectory:
    """Reset ``env`` to ``task`` and play ``actions``, stopping where the episode ends."""
    obs = env.reset(task)
    traj = Trajectory(task=task, group_id=group_id)
    for action in actions:
        before = obs.text
        obs, _, done, info = env.step(action)
        traj.steps.append(Step(observation=before, response=action, action=action,
                               valid=info.valid, reward=0.0, anchor_key=before, snapshot={},
                               prompt_ids=[], response_ids=[], sampling_logprobs=[]))
        if done:
            break
    traj.final_observation, traj.won = obs.text, info.won if traj.steps else False
    return traj
