"""RLOO base advantages (docs/backbones.md §3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.grpo import episode_group_diagnostics, group_centre
from agentcredit.credit.registry import register_estimator
from agentcredit.credit.result import CreditResult


@dataclass(frozen=True)
class RLOOConfig:
    """Options of the RLOO backbone (Ahmadian et al. 2024, "Back to Basics"); it has none."""

    config_name: ClassVar[str] = "rloo"


@register_estimator("rloo", RLOOConfig, claims=("step_credit", "constant_group_zero",
                                                "permutation", "returns_only", "turn_baseline"))
def rloo(batch: CreditBatch, config: RLOOConfig) -> CreditResult:
    """RLOO leave-one-out advantage, broadcast to every step (docs/backbones.md §3).

    ``A_i = R_i − mean_{k≠i} R_k`` over the other rollouts of ``i``'s group, with
    ``R_i`` = ``batch.returns [B]``. Computed as ``n/(n−1) · (R_i − μ_g)``, which is
    the same quantity. [choice] A group of size 1 has no other rollout to
    compare with, so its advantage is 0.

    Returns ``step_advantages [S]`` = ``A_{step_rollout[s]}``.
    Tested properties: hand-computed leave-one-out values; equal returns give 0;
    advantages sum to 0 within each group.
    """
    group = batch.group_index  # [B]
    stats = group_centre(batch.returns, group, batch.num_groups)
    n = stats.counts[group].to(torch.float64)  # [B]
    scale = torch.where(n > 1, n / (n - 1).clamp(min=1), 0.0)  # [B]
    rollout_adv = (stats.centred * scale).to(batch.step_rewards.dtype)  # [B]
    return CreditResult(
        step_advantages=rollout_adv[batch.step_rollout],  # [S]
        diagnostics=episode_group_diagnostics(batch, rollout_adv),
    )
