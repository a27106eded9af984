"""Rollouts played from a list of actions: ``played``, the trajectory as the collector records
it, for the credit truths' tests (``tests/train/evaluation/credit_check/test_truths.py``,
``tests/envs/*/test_solver.py``); ``played_states``, what the verifier tracer reads of it, for
VICT's case studies (``tests/credit/vict/``)."""

from __future__ import annotations

from dataclasses import dataclass

from agentcredit.envs.base import Environment, Task
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.verifier.trace import RolloutTrace, trace_rollout


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


@dataclass(frozen=True)
class PlayedStates:
    """What the tracer reads of a played rollout: the observation, snapshot and admissible set
    before the first action and after each one, and whether the last action won."""

    observations: tuple[str, ...]
    snapshots: tuple[dict, ...]
    admissible: tuple[tuple[str, ...], ...]
    won: bool

    def trace(self, verifier, actions: tuple[str, ...]) -> RolloutTrace:
        """The rollout's trace, with the admissible sets the collector records."""
        return trace_rollout(verifier, list(self.observations), list(self.snapshots),
                             actions, valid=[True] * len(actions),
                             admissible=list(self.admissible))


def played_states(env: Environment, task: Task, actions: tuple[str, ...]) -> PlayedStates:
    """Reset ``env`` to ``task`` and play ``actions``, every one of which must be valid (a
    case study's rollout is played as written)."""
    obs = env.reset(task)
    observations, snapshots = [obs.text], [env.snapshot()]
    admissible, won = [obs.admissible_actions], False
    for action in actions:
        obs, _, _, info = env.step(action)
        assert info.valid, f"{action!r} is not admissible"
        observations.append(obs.text)
        snapshots.append(env.snapshot())
        admissible.append(obs.admissible_actions)
        won = info.won
    return PlayedStates(tuple(observations), tuple(snapshots), tuple(admissible), won)
