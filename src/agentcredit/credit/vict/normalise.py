"""Group normalisation of atom marginals (docs/vict.md §4.5).

``δ̂_{i,j} = (δ_{i,j} − m_j) / (s_j + ε)`` within one task group. The default centre
(``centre="mean"``) is the group mean ``m_j`` with the population std ``s_j``; the paper's
literal reading (``centre="median"``) is the group median with ``s_j = 1.4826 · MAD_j``,
falling back to the population std when the MAD is 0. [choice] An atom that is constant in
the group gets ``δ̂ = 0``: it tells the rollouts apart in no way, so it carries no
differential credit.

Why the mean: atom statuses are binary, so the median sits on the group's majority, and
every rollout on the majority side gets ``δ̂ = 0`` on every atom; the correction could then
only add weight to the minority, always with the sign of its own base advantage. Centred on
the mean, a failed rollout that reached an atom most of its group missed keeps positive
credit on that atom while its failed commit is blamed, and a success is still credited for
an atom part of its group missed.

``atom_marginals`` gives the raw ``δ`` of one rollout under the reading
``VICTConfig.marginal`` names: the trace's signed statuses, or each atom's counterfactual
marginal on the verifier score.
"""

from __future__ import annotations

import torch
from torch import Tensor

from agentcredit.verifier.atoms import Status
from agentcredit.verifier.trace import RolloutTrace

MAD_TO_STD = 1.4826  # makes the MAD a consistent estimator of a normal std


def _median(x: Tensor) -> Tensor:
    """Medians over the rollout axis (``-2``); the midpoint of the middle two for even ``N``."""
    return torch.quantile(x, 0.5, dim=-2, keepdim=True)


def atom_marginals(trace: RolloutTrace, reading: str) -> tuple[float, ...]:
    """The raw ``δ_{i,·} [J]`` of one rollout: ``status``: ``trace.delta`` (the signed
    statuses); ``counterfactual``: ``F(z̄) − F(z̄ with atom j UNSAT)`` per atom ``j``, with
    ``z̄`` the final statuses and ``F`` ``trace.aggregate`` (0 for an atom already UNSAT or
    UNK)."""
    if reading == "status":
        return trace.delta
    if reading != "counterfactual":
        raise ValueError(f"atom_marginals: reading {reading!r}; use 'status' or "
                         "'counterfactual' (VICTConfig.marginal)")
    final = dict(zip(trace.atom_ids, trace.statuses[-1], strict=True))
    score = trace.aggregate(final)
    return tuple(score - trace.aggregate({**final, j: Status.UNSAT})
                 if z in (Status.SAT, Status.VIOL) else 0.0 for j, z in final.items())


def robust_normalise(delta: Tensor, eps: float, centre: str = "mean") -> Tensor:
    """``δ̂ [..., N, J]`` from the raw atom values ``δ [..., N, J]`` of ``N`` rollouts.

    Leading dimensions are independent groups of the same size (normalised in one call).
    ``centre="mean"``: ``(δ − mean_j) / (std_j + ε)``; ``centre="median"``: the median and
    ``1.4826·MAD`` (std when the MAD is 0).
    Tested properties: a constant column gives exactly 0; rollouts on the
    centre get 0; the sign of ``δ̂`` is the sign of ``δ`` less the centre.
    """
    if centre not in ("median", "mean"):
        raise ValueError(f"robust_normalise: centre {centre!r}; use 'median' or 'mean' "
                         "(VICTConfig.centre)")
    if delta.dim() < 2:
        raise ValueError(f"robust_normalise expects [..., N, J] atom values; got shape "
                         f"{tuple(delta.shape)}")
    x = delta.to(torch.float64)
    if x.shape[-2] == 0 or x.shape[-1] == 0:
        return x.clone()
    std = x.std(dim=-2, unbiased=False, keepdim=True)  # [..., 1, J]
    if centre == "mean":
        middle, scale = x.mean(dim=-2, keepdim=True), std  # [..., 1, J] each
    else:
        middle = _median(x)  # [..., 1, J]
        mad = _median((x - middle).abs())  # [..., 1, J]
        scale = torch.where(mad > 0, MAD_TO_STD * mad, std)  # [..., 1, J]
    constant = x.amax(dim=-2, keepdim=True) == x.amin(dim=-2, keepdim=True)  # [..., 1, J]
    out = (x - middle) / (scale + eps)  # [..., N, J]
    return torch.where(constant, 0.0, out)
