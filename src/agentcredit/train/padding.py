"""Micro-batches with little padding for rows run without a shared prefix (``optim.layout=rows``
and the rows of ``train.prefix_tree`` that share nothing): sort the rows by length
(``by_length``) before cutting them into micro-batches."""

from __future__ import annotations

import torch
from torch import Tensor


def by_length(rows: Tensor, attention_mask: Tensor) -> Tensor:
    """``rows`` (indices into ``attention_mask``'s ``[S, L]``) sorted by sequence length.

    Micro-batches cut from the sorted rows hold sequences of similar length, so
    ``trim_padding`` leaves little padding in each; a gradient summed over the
    micro-batches of a mini-batch does not depend on how its rows were split.
    """
    return rows[torch.argsort(attention_mask[rows].sum(1), stable=True)]
