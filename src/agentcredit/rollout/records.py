"""The records a rollout produces (docs/design.md, "Records"): ``Step`` and ``Trajectory``.

Plain data: no tensors that need a model, no callbacks. The collector fills
them, the trainer tensorises them (``train.step_tensors.tensorize_steps``), the
credit functions read rewards and anchor keys from them.

Training unit: a step's training sample is exactly the windowed prompt it was
sampled from (``prompt_ids``) followed by its response (``response_ids``); only
the response tokens get loss, so every policy token is trained exactly once and
no prompt or environment token ever is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentcredit.envs.base import Task


@dataclass
class Step:
    """One turn of one rollout: what the policy saw, what it wrote, what the environment did.

    Attributes:
        observation: the environment text the policy saw before acting (``h_t``'s
            newest part); also the GiGPO anchor state.
        response: the decoded response text ``a_t`` (without the end-of-turn token).
        action: the parsed action sent to the environment, or ``None`` when the
            response could not be parsed (the raw response was sent instead).
        valid: the action parsed and the environment accepted it (docs/backbones.md §2).
        reward: ``r_{i,t}``: the invalid-action penalty at this step plus the
            outcome reward when this is the rollout's last step (docs/backbones.md §2).
        anchor_key: the GiGPO anchor key (docs/backbones.md §3), the observation text before the
            step.
        snapshot: the environment's state snapshot Φ after the step (docs/vict.md §4.1).
        prompt_ids: token ids of the chat prompt the response was sampled from.
        response_ids: sampled token ids, the end-of-turn token included when emitted.
        sampling_logprobs: per response token, the log-prob under the sampling
            distribution (temperature applied), same length as ``response_ids``.
        env_reward: the environment's own reward for the step, in [0, 1].
        allowed_ids: with admissible decoding, per response token the ids it was
            sampled among (``rollout.admissible``); every scoring pass renormalises
            over them. ``None``: sampled from the whole vocabulary.
        admissible: the actions the environment admitted in the state the step was taken in
            (``Observation.admissible_actions`` of ``observation``); VICT's ``support`` edges
            read them (docs/vict.md §4.3). ``None`` when not recorded.
    """

    observation: str
    response: str
    action: str | None
    valid: bool
    reward: float
    anchor_key: str
    snapshot: dict[str, Any]
    prompt_ids: list[int]
    response_ids: list[int]
    sampling_logprobs: list[float]
    env_reward: float = 0.0
    allowed_ids: list[list[int]] | None = None
    admissible: tuple[str, ...] | None = None


@dataclass
class Trajectory:
    """One rollout ``τ_i`` of one task.

    Attributes:
        task: the task it ran.
        group_id: rollouts of the same task in one batch share it (docs/backbones.md §0).
        steps: the steps in time order (at least one).
        won: the environment's success check at the end.
        outcome_reward: ``R^out`` of docs/backbones.md §2 (ALFWorld ``10·1[won]``), included in
            the last step's ``reward``.
        truncated: the rollout hit the step limit before the episode ended.
        initial_snapshot: Φ_0, the state snapshot after reset (None when the
            collector did not record snapshots); VICT's tracer needs it.
        final_observation: the environment text after the last step, which the
            policy never acted on; VICT's evidence extractors read it.
        final_admissible: the actions admissible after the last step (``None`` when not
            recorded); with each step's ``admissible``, the ``T+1`` sets VICT's support edges
            read.
        env_metrics: the environment's metrics of the episode (``StepInfo.metrics`` of
            the last step).
    """

    task: Task
    group_id: int
    steps: list[Step] = field(default_factory=list)
    won: bool = False
    outcome_reward: float = 0.0
    truncated: bool = False
    initial_snapshot: dict[str, Any] | None = None
    final_observation: str = ""
    final_admissible: tuple[str, ...] | None = None
    env_metrics: dict[str, float] = field(default_factory=dict)

    @property
    def total_reward(self) -> float:
        """``Σ_t r_{i,t}``: outcome plus invalid-action penalties."""
        return sum(step.reward for step in self.steps)

    @property
    def num_invalid(self) -> int:
        """Steps whose action was unparsable or not admissible."""
        return sum(not step.valid for step in self.steps)
