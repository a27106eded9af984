"""DAPO's soft overlong punishment (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement
Learning System at Scale"), added to the step rewards before any estimator reads them.

One home for both training paths: ``agentcredit train`` applies it in
``train/credit_inputs.py`` and judges dynamic sampling's returns with it
(``train/batch_source.py``); the verl path applies it to the rows' credit batch
(``integrations/verl/rows.py``, ``compute_row_credit``).

Per step with a response of ``|y|`` tokens, ``L_max`` = ``rollout.max_new_tokens``,
``L_c = max(1, round(buffer · L_max))``, ``c`` = ``rollout.overlong_penalty``:

    r_len(|y|) = c · clip(((L_max − L_c) − |y|) / L_c, −1, 0)

0 up to ``L_max − L_c`` tokens, then linear down to ``−c`` at the limit (a response
the limit cut off). [choice] DAPO's penalty ranges over [−1, 0] next to ±1 rewards;
here it is per step, and ``method=dapo`` sets ``c`` to one invalid-action penalty (0.1),
as both mark a malformed step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from agentcredit.credit.batch import CreditBatch
from agentcredit.rollout.records import Trajectory


def response_lengths(trajectories: Sequence[Trajectory]) -> Tensor:
    """``|y| [S]``: sampled response tokens of every step, in the batch's flat step order."""
    return torch.tensor([len(s.response_ids) for t in trajectories for s in t.steps],
                        dtype=torch.long)


@dataclass(frozen=True)
class OverlongPenalty:
    """The penalty's settings (module docstring).

    Attributes:
        max_tokens: ``L_max``, ``rollout.max_new_tokens``.
        buffer: ``L_c / L_max``, ``rollout.overlong_buffer``; 0 turns the penalty off.
        penalty: ``c``, ``rollout.overlong_penalty``.
    """

    max_tokens: int
    buffer: float
    penalty: float

    @classmethod
    def of(cls, rollout) -> OverlongPenalty:
        """The settings of a ``RolloutConfig`` (``config.rollout``)."""
        return cls(rollout.max_new_tokens, rollout.overlong_buffer, rollout.overlong_penalty)

    @property
    def on(self) -> bool:
        """Whether any response can be penalised (``buffer > 0``)."""
        return self.buffer > 0

    def step_penalties(self, lengths: Tensor) -> Tensor:
        """``r_len [S]`` float32 for response lengths ``|y| [S]``; all 0 when off."""
        if not self.on:
            return torch.zeros(lengths.shape, dtype=torch.float32)
        cache = max(1, round(self.buffer * self.max_tokens))  # L_c
        excess = ((self.max_tokens - cache) - lengths.to(torch.float32)) / cache
        return self.penalty * excess.clamp(-1.0, 0.0)

    def apply(self, batch: CreditBatch, lengths: Tensor) -> tuple[CreditBatch, dict[str, float]]:
        """``batch`` with ``r_len`` added to its ``step_rewards`` (``lengths [S]`` in the batch's
        flat step order), and ``reward/overlong_step_share`` (steps penalised) and
        ``reward/overlong_penalty_mean``; ``batch`` unchanged and no metrics when off."""
        if not self.on:
            return batch, {}
        penalty = self.step_penalties(lengths)
        shaped = dataclasses.replace(batch, step_rewards=batch.step_rewards
                                     + penalty.to(batch.step_rewards))
        return shaped, {"reward/overlong_step_share": float((penalty < 0).float().mean()),
                        "reward/overlong_penalty_mean": float(penalty.mean())}
