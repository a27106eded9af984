"""Micro-batches with little padding, for every pass over ``StepTensors`` rows (scoring, SFT,
PPO): sort the rows by length (``by_length``), cut the sorted rows into micro-batches and
drop each one's all-padding columns (``trim_padding``)."""

from __future__ import annotations

import torch
from torch import Tensor


def trim_padding(input_ids: Tensor, attention_mask: Tensor, *others: Tensor) -> tuple[Tensor, ...]:
    """Drop the columns that are padding in every row of right-padded ``[b, L]`` rows.

    Applied to a micro-batch of ``StepTensors`` rows (and any aligned ``[b, L, ...]``
    tensors in ``others``, such as ``allowed``) so a forward pass never runs over
    all-padding columns.
    """
    length = int(attention_mask.sum(1).max())
    return (input_ids[:, :length], attention_mask[:, :length],
            *(t[:, :length] for t in others))


def by_length(rows: Tensor, attention_mask: Tensor) -> Tensor:
    """``rows`` (indices into ``attention_mask``'s ``[S, L]``) sorted by sequence length.

    Micro-batches cut from the sorted rows hold sequences of similar length, so
    ``trim_padding`` leaves little padding in each; a gradient summed over the
    micro-batches of a mini-batch does not depend on how its rows were split.
    """
    return rows[torch.argsort(attention_mask[rows].sum(1), stable=True)]
