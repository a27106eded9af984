"""Micro-batch padding (train/padding.py): rows sorted by length, all-padding columns dropped."""

from __future__ import annotations

import torch

from agentcredit.train.padding import by_length


def test_by_length_orders_rows_by_their_real_length_stably():
    attention = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0],
                              [1, 0, 0, 0]])
    assert by_length(torch.tensor([0, 1, 2, 3, 4]), attention).tolist() == [1, 4, 3, 0, 2]
    assert by_length(torch.tensor([2, 0]), attention).tolist() == [0, 2]
