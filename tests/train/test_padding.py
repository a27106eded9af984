"""Micro-batch padding (train/padding.py): rows sorted by length, all-padding columns dropped."""

from __future__ import annotations

import torch

from agentcredit.train.padding import by_length, trim_padding


def test_by_length_orders_rows_by_their_real_length_stably():
    attention = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0],
                              [1, 0, 0, 0]])
    assert by_length(torch.tensor([0, 1, 2, 3, 4]), attention).tolist() == [1, 4, 3, 0, 2]
    assert by_length(torch.tensor([2, 0]), attention).tolist() == [0, 2]


def test_trim_padding_drops_only_the_columns_padded_in_every_row():
    ids = torch.tensor([[1, 2, 0, 0], [3, 0, 0, 0]])
    attention = (ids != 0).long()
    allowed = torch.arange(16).reshape(2, 4, 2)
    cut_ids, cut_attention, cut_allowed = trim_padding(ids, attention, allowed)
    assert cut_ids.tolist() == [[1, 2], [3, 0]]
    assert cut_attention.tolist() == [[1, 1], [1, 0]]
    assert torch.equal(cut_allowed, allowed[:, :2])
