"""ADRS module 1, within-step calibration (docs/adrs.md §5.2): ``q̂`` from the teacher's
scores."""

from __future__ import annotations

from torch import Tensor

from agentcredit.credit.grpo import (
    group_centre,
    group_std,
)

# MODULE 1: WITHIN-STEP CALIBRATION


def calibrate(teacher: Tensor, token_step: Tensor, num_steps: int, *, scope: str,
              token_rollout: Tensor, num_rollouts: int, eps: float) -> Tensor:
    """Within-step calibrated teacher scores ``q̂ [N]`` (docs/adrs.md §5.2).

    ``b_s = mean_{j∈V_s} ℓ^T_{s,j}``; ``q = ℓ^T − b_s``; ``σ_q`` = population
    std of ``q`` over the scope (``global``: all ``N`` tokens; ``per_step``: the
    tokens of the token's step; ``per_rollout``: the tokens of the token's
    rollout); ``q̂ = q / (σ_q + ε)``.

    Args:
        teacher: ``[N]`` ``ℓ^T``.
        token_step: ``[N]`` flat step of each token; every step has ≥ 1 token.
        num_steps: ``S``.
        scope: ``global``, ``per_step`` or ``per_rollout``.
        token_rollout: ``[N]`` rollout of each token (read by ``per_rollout``).
        num_rollouts: ``B``.
        eps: ``ε``.

    Returns ``q̂ [N]`` in float64. Tested property: it sums to zero over each
    step's tokens (the denominator is shared within a step under every scope).
    """
    q = group_centre(teacher, token_step, num_steps).centred  # ℓ^T − b_s, float64 [N]
    if scope == "global":
        sigma = q.std(correction=0).expand_as(q)
    elif scope == "per_step":
        sigma = group_std(q, token_step, num_steps)[token_step]
    elif scope == "per_rollout":
        sigma = group_std(q, token_rollout, num_rollouts)[token_rollout]
    else:
        raise ValueError(f"calibrate scope = {scope!r}; choose one of global, per_step, "
                         "per_rollout.")
    return q / (sigma + eps)
