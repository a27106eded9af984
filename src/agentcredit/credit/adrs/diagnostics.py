"""ADRS diagnostics on probe trajectories (docs/adrs.md §5.5): the teacher's gap per token
class."""

from __future__ import annotations

import torch
from torch import Tensor

TOKEN_CLASSES = ("action", "object", "other")


# DIAGNOSTICS ON PROBE TRAJECTORIES (docs/adrs.md §5.5)


def token_class_gap(token_class: Tensor, teacher: Tensor, behaviour: Tensor) -> dict[str, float]:
    """Mean ``ℓ^T − ℓ^b`` per token class on probe trajectories (docs/adrs.md §5.5, paper Fig. 6).

    Args:
        token_class: ``[N]`` int64, the index in ``TOKEN_CLASSES`` (action,
            object, other) of each token (``train/evaluation/probes.py`` classifies them).
        teacher: ``[N]`` ``ℓ^T``. behaviour: ``[N]`` ``ℓ^b``.

    Returns ``gap.<class>`` (mean gap) and ``tokens.<class>`` (count) for every
    class with at least one token; a class with no token has no ``gap`` entry.
    """
    gap = teacher.to(torch.float64) - behaviour.to(torch.float64)
    out: dict[str, float] = {}
    for index, name in enumerate(TOKEN_CLASSES):
        members = token_class == index
        count = int(members.sum())
        out[f"tokens.{name}"] = float(count)
        if count:
            out[f"gap.{name}"] = gap[members].mean().item()
    return out
