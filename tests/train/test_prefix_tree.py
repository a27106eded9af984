"""The prefix-tree layout of step rows (train/prefix_tree.py), on hand-built token rows."""

from __future__ import annotations

import pytest
import torch

from agentcredit.train.prefix_tree import (
    layout_line,
    layout_trees,
    prefix_trees,
    row_trees,
    step_trees,
    uses_trees,
)


def _rows(sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, sequences))
    ids = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, seq in enumerate(sequences):
        ids[i, :len(seq)] = torch.tensor(seq)
    return ids, torch.tensor([len(seq) for seq in sequences])


def test_a_growing_history_is_one_trunk_with_each_step_attached_where_it_departs():
    # prompts: head [1 2 3], then the history so far, then the step's own lines [9 t]
    sequences = [[1, 2, 3, 9, 0, 50],                  # step 0: prompt of 5, response [50]
                 [1, 2, 3, 4, 4, 9, 1, 51],            # step 1: history [4 4]
                 [1, 2, 3, 4, 4, 5, 5, 9, 2, 52, 53]]  # step 2: history [4 4 5 5]
    ids, lengths = _rows(sequences)
    first = torch.tensor([5, 7, 9])
    (tree,) = prefix_trees(ids, lengths, first, torch.zeros(3, dtype=torch.long))
    # the trunk is step 2's prompt up to its cap (9 − 1 = 8 tokens); step 0 departs from it
    # after [1 2 3], step 1 after [1 2 3 4 4], step 2 is capped at its first scored − 1
    assert tree.rows.tolist() == [0, 1, 2]
    assert tree.attach.tolist() == [3, 5, 8]
    assert (tree.trunk_row, tree.trunk_len) == (2, 8)
    # trunk 8 + branches (6 − 3) + (8 − 5) + (11 − 8) = 17 tokens, against 25 as rows
    assert tree.tokens(lengths) == 17


def test_an_attachment_never_reaches_the_tokens_a_row_scores():
    """A step whose prompt and response are both a prefix of a later prompt (the response is
    written into the history) still predicts its response inside its own branch."""
    sequences = [[1, 2, 3, 7, 8], [1, 2, 3, 7, 8, 6, 9]]
    ids, lengths = _rows(sequences)
    (tree,) = prefix_trees(ids, lengths, torch.tensor([3, 6]), torch.zeros(2, dtype=torch.long))
    assert tree.attach.tolist() == [2, 5]


def test_a_slid_window_starts_a_tree_of_its_own_and_rows_sharing_nothing_run_as_rows():
    # step 2's window dropped step 0's line [3 3 3], so it shares only the head [1] with the
    # others: joining them would compute 19 tokens (trunk 5 + branches 5, 7, 2) against 17
    # apart (the first tree's 10 + 7), so it starts a tree, and step 3 joins that one
    sequences = [[1, 3, 3, 3, 8, 60],
                 [1, 3, 3, 3, 4, 4, 8, 61],
                 [1, 4, 4, 5, 5, 8, 62],
                 [1, 4, 4, 5, 5, 6, 6, 8, 63]]
    ids, lengths = _rows(sequences)
    first = torch.tensor([5, 7, 6, 8])
    trees = prefix_trees(ids, lengths, first, torch.zeros(4, dtype=torch.long))
    assert [t.rows.tolist() for t in trees] == [[0, 1], [2, 3]]
    assert [t.attach.tolist() for t in trees] == [[4, 6], [5, 7]]
    # rows with no common prefix gain nothing from a trunk (a tie is not shared): they run
    # together as plain rows, shortest first, without a trunk
    ids, lengths = _rows([[1, 2, 2, 9, 50], [7, 9, 51]])
    lone = prefix_trees(ids, lengths, torch.tensor([4, 2]), torch.zeros(2, dtype=torch.long))
    assert [(t.rows.tolist(), t.attach.tolist(), t.trunk_len) for t in lone] == \
        [([1, 0], [0, 0], 0)]


def test_rows_share_a_tree_only_within_their_group():
    sequences = [[1, 2, 3, 4, 9], [1, 2, 3, 4, 5, 9], [1, 2, 3, 4, 9], [1, 2, 3, 4, 5, 6, 9]]
    ids, lengths = _rows(sequences)
    trees = prefix_trees(ids, lengths, torch.tensor([4, 5, 4, 6]), torch.tensor([0, 1, 0, 1]))
    assert [t.rows.tolist() for t in trees] == [[0, 2], [1, 3]]
    assert [t.attach.tolist() for t in trees] == [[3, 3], [4, 5]]


def test_step_trees_read_the_first_response_token_and_keep_the_rows_asked_for():
    ids, lengths = _rows([[1, 2, 3, 9, 50], [1, 2, 3, 4, 9, 51], [7, 7, 9, 52]])
    attention = (torch.arange(ids.shape[1])[None] < lengths[:, None]).long()
    loss_mask = torch.zeros_like(ids, dtype=torch.bool)
    for row, first in enumerate([4, 5, 3]):
        loss_mask[row, first:lengths[row]] = True
    trees = step_trees(ids, attention, loss_mask, torch.tensor([0, 0, 1]),
                       rows=torch.tensor([1, 0, 2]))
    assert [(t.rows.tolist(), t.attach.tolist(), t.trunk_row) for t in trees] == \
        [([1, 0], [3, 3], 0), ([2], [0], 2)]
    loss_mask[2] = False
    with pytest.raises(ValueError, match="at least one response token"):
        step_trees(ids, attention, loss_mask, torch.tensor([0, 0, 1]))


class _Model:
    def __init__(self, **config) -> None:
        self.config = type("Config", (), config)()


def test_only_full_attention_models_with_sdpa_or_eager_run_as_trees():
    assert uses_trees(_Model(_attn_implementation="sdpa", layer_types=["full_attention"]),
                      "trees")
    assert not uses_trees(_Model(_attn_implementation="sdpa"), "rows")
    assert not uses_trees(_Model(_attn_implementation="flash_attention_2"), "trees")
    assert not uses_trees(_Model(_attn_implementation="eager", use_sliding_window=True), "trees")
    with pytest.raises(ValueError, match="trees or rows"):
        uses_trees(_Model(_attn_implementation="sdpa"), "packed")


def test_the_rows_layout_is_one_tree_without_a_trunk_sorted_by_length():
    ids, lengths = _rows([[1, 2, 3, 9, 50], [1, 9, 51], [1, 2, 9, 52, 53]])
    steps = type("Steps", (), {"input_ids": ids,
                               "attention_mask": (torch.arange(5)[None] < lengths[:, None]).long()})
    (tree,) = layout_trees(_Model(_attn_implementation="sdpa"), steps, "rows")
    assert (tree.rows.tolist(), tree.attach.tolist(), tree.trunk_len) == ([1, 0, 2], [0, 0, 0], 0)


def test_row_trees_sort_the_rows_by_their_real_length_stably():
    attention = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0],
                              [1, 0, 0, 0]])
    (tree,) = row_trees(torch.tensor([0, 1, 2, 3, 4]), attention)
    assert tree.rows.tolist() == [1, 4, 3, 0, 2] and tree.trunk_len == 0
    assert row_trees(torch.tensor([2, 0]), attention)[0].rows.tolist() == [0, 2]
    assert row_trees(torch.tensor([], dtype=torch.long), attention) == []


def test_branch_batches_cover_the_rows_in_order_and_an_empty_batch_is_refused():
    (tree,) = row_trees(torch.arange(5), torch.ones(5, 3, dtype=torch.long))
    assert [b.tolist() for b in tree.batches(2)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="at least 1"):
        tree.batches(0)


def test_the_layout_line_says_which_layout_ran_and_why_trees_fell_back_to_rows():
    full = {"layer_types": ["full_attention"]}
    assert layout_line(_Model(_attn_implementation="sdpa", **full), "trees") == \
        "layout: prefix trees"
    assert layout_line(_Model(_attn_implementation="sdpa", **full), "rows") == \
        "layout: rows (optim.layout=rows)"
    assert layout_line(_Model(_attn_implementation="flash_attention_2", **full), "trees") == (
        "layout: rows, not prefix trees: its attention implementation 'flash_attention_2' "
        "takes no padding mask over a shared trunk (sdpa and eager do)")
    assert layout_line(_Model(_attn_implementation="sdpa", use_sliding_window=True), "trees") == \
        "layout: rows, not prefix trees: the model has sliding-window attention layers"
