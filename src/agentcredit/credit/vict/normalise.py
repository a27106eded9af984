"""Group-robust normalisation of atom marginals (docs/vict.md §4.5).

``δ̂_{i,j} = (δ_{i,j} − med_j) / (s_j + ε)`` within one task group, with
``med_j`` the group median of atom ``j``'s raw signed values and
``s_j = 1.4826 · MAD_j``, falling back to the population std when the MAD is 0.
[choice] An atom that is constant in the group gets ``δ̂ = 0``: it tells the
rollouts apart in no way, so it carries no differential credit.

Median centring means an atom most of the group reached earns nothing for
reaching it; the credit goes to the rollouts that differ from the majority.
"""

from __future__ import annotations

import torch
from torch import Tensor

MAD_TO_STD = 1.4826  # makes the MAD a consistent estimator of a normal std


def _median(x: Tensor) -> Tensor:
    """Medians over the rollout axis (``-2``); the midpoint of the middle two for even ``N``."""
    return torch.quantile(x, 0.5, dim=-2, keepdim=True)


def robust_normalise(delta: Tensor, eps: float) -> Tensor:
    """``δ̂ [..., N, J]`` from the raw signed atom values ``δ [..., N, J]`` of ``N`` rollouts.

    Leading dimensions are independent groups of the same size (normalised in one call).
    Tested properties: a constant column gives exactly 0; rollouts on the
    median get 0; the sign of ``δ̂`` is the sign of ``δ − med``.
    """
    if delta.dim() < 2:
        raise ValueError(f"robust_normalise expects [..., N, J] atom values; got shape "
                         f"{tuple(delta.shape)}")
    x = delta.to(torch.float64)
    if x.shape[-2] == 0 or x.shape[-1] == 0:
        return x.clone()
    med = _median(x)  # [..., 1, J]
    mad = _median((x - med).abs())  # [..., 1, J]
    std = x.std(dim=-2, unbiased=False, keepdim=True)  # [..., 1, J]
    scale = torch.where(mad > 0, MAD_TO_STD * mad, std)  # [..., 1, J]
    constant = x.amax(dim=-2, keepdim=True) == x.amin(dim=-2, keepdim=True)  # [..., 1, J]
    out = (x - med) / (scale + eps)  # [..., N, J]
    return torch.where(constant, 0.0, out)
