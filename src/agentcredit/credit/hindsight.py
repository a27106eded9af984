"""Per-step hindsight scores of a batch: the part of a ``CreditBatch`` HCAPO reads.

HCAPO (``credit/hcapo.py``) compares how likely the policy finds each response
before and after it has seen how the episode ended. The trainer's hindsight
pass (``train/scoring/hindsight_pass.py``) rescores the sampled response tokens with the
trajectory's final observation added to the prompt; this record keeps, per flat
step ``s``, the mean log-prob of the step's response tokens both ways:

    m^H_s = mean_{j∈V_s} ℓ^H_{s,j}     (with the final observation in the prompt)
    m^b_s = mean_{j∈V_s} ℓ^b_{s,j}     (the ordinary prompt: PPO's old log-probs)

The trainer rescores only the rollouts whose hindsight HCAPO reads
(``credit.hcapo.hindsight_rollouts``); on the other steps ``m^H = m^b``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from agentcredit.credit.tensor_checks import check_finite, check_float_vector, check_on_device


@dataclass(frozen=True, eq=False)
class HindsightScores:
    """Per-step mean response log-probs with and without hindsight, ``[S]`` each.

    Attributes:
        hindsight: ``m^H [S]``, the mean over the step's response tokens of
            ``log π_θb(y_j | h_s ⊕ o_T, y_<j)``, the behaviour snapshot with the
            rollout's final observation ``o_T`` in the prompt (detached).
        behaviour: ``m^b [S]``, the same mean of ``log π_θb(y_j | h_s, y_<j)``.
    """

    hindsight: Tensor
    behaviour: Tensor

    @classmethod
    def from_step_rows(cls, loss_mask: Tensor, hindsight_logprobs: Tensor,
                       behaviour_logprobs: Tensor) -> HindsightScores:
        """Means over each row's response tokens of ``[S, L]`` position-aligned log-probs
        (row ``s`` = flat step ``s``, ``loss_mask [S, L]`` its response tokens)."""
        mask = loss_mask.to(torch.float32)
        count = mask.sum(1).clamp(min=1)  # [S]
        return cls(hindsight=(hindsight_logprobs.float() * mask).sum(1) / count,
                   behaviour=(behaviour_logprobs.float() * mask).sum(1) / count)


def check_hindsight_scores(scores: HindsightScores, num_steps: int, device: torch.device) -> None:
    """Raise, saying what to fix, unless ``scores`` fits a batch of ``num_steps`` steps."""
    if not isinstance(scores, HindsightScores):
        raise TypeError(f"CreditBatch.hindsight must be a HindsightScores or None; got "
                        f"{type(scores).__name__}. Build it with HindsightScores.from_step_rows.")
    for name in ("hindsight", "behaviour"):
        value, field = getattr(scores, name), f"CreditBatch.hindsight.{name}"
        check_float_vector(value, field, f"with one mean log-prob per step ({num_steps})",
                           length=num_steps)
        check_finite(value, field, "average only real response tokens")
        check_on_device(value, field, device)
