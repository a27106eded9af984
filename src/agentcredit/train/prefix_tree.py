"""Prefix trees over step rows: the tokens a trajectory's rows share are computed once
(docs/backbones.md §0.1).

Each step row is ``prompt_t + response_t``, and step ``t``'s prompt repeats the history that
step ``t − 1``'s prompt already held. A tree is a *trunk* (a prefix of one of its rows, token
positions ``0 … A − 1``) and one *branch* per row: row ``i``'s tokens from its attachment
point ``a_i`` on, where ``a_i`` is at most the longest common prefix of the row and the trunk.
A branch token at position ``p ≥ a_i`` sees the trunk's first ``a_i`` tokens and the branch's
own tokens before it, at the position ids of the row, which is exactly what it sees in the
row; so the tree's log-probs are the rows' (to float rounding), and the trunk's tokens are
computed once instead of once per row.

The layout reads the rows' stored token ids only (never re-tokenised text), so a row whose
prompt shares nothing with the others (a history window that slid, a prompt cut by
``rollout.max_prompt_tokens``, a rewritten privileged prompt) simply attaches at 0 or starts a
tree of its own: the layout is right in every case and saves where prefixes are shared.

``prefix_trees`` builds the trees, ``step_trees`` those of ``StepTensors`` rows, and
``layout_trees`` the ones a pass runs under ``optim.layout`` (``uses_trees``; ``row_trees``
lays rows out without a trunk); ``train/scoring/tree_forward.py`` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from agentcredit.rollout.policy import has_full_attention


@dataclass(frozen=True)
class PrefixTree:
    """One trunk and the rows that branch from it.

    Attributes:
        rows: ``[b]`` int64, the rows (of the ``[S, L]`` batch the tree was built from).
        attach: ``[b]`` int64, ``a_i``: row ``rows[i]``'s tokens ``0 … a_i − 1`` are the trunk's;
            its branch is its tokens from ``a_i`` on.
        trunk_row: the row whose first ``trunk_len`` tokens are the trunk.
        trunk_len: ``A = max_i a_i``, the trunk's length (0: the rows share nothing and run as
            plain rows).
    """

    rows: Tensor
    attach: Tensor
    trunk_row: int
    trunk_len: int

    def batches(self, size: int) -> list[Tensor]:
        """Positions in ``rows`` of each branch batch of at most ``size`` rows, in order."""
        if size < 1:
            raise ValueError(f"a branch batch of {size} rows: use at least 1 "
                             "(optim.micro_batch_size, optim.score_micro_batch_size)")
        return list(torch.arange(len(self.rows)).split(size))

    def tokens(self, lengths: Tensor) -> int:
        """Tokens one forward of the tree computes: ``A + Σ_i (len_i − a_i)``."""
        return self.trunk_len + int((lengths[self.rows] - self.attach).sum())


def _common_prefix(row: np.ndarray, others: np.ndarray) -> np.ndarray:
    """``[n]`` length of the common prefix of ``row`` ``[L]`` and each of ``others`` ``[n, L]``."""
    differs = others != row[None, :]
    return np.where(differs.any(axis=1), differs.argmax(axis=1), row.shape[0])


def prefix_trees(input_ids: Tensor, lengths: Tensor, first_scored: Tensor,
                 groups: Tensor) -> list[PrefixTree]:
    """The prefix trees of right-padded rows, built greedily in row order within each group.

    A row joins the tree of the group's previous rows when that computes fewer tokens than
    starting a tree of its own; the tree's trunk is then a prefix of the newest row's
    sequence, and every member's attachment point is recomputed against it. A row's
    attachment is capped at ``first_scored − 1``, so every log-prob the row needs is
    predicted inside its own branch.

    Args:
        input_ids: ``[S, L]`` int64, right-padded rows.
        lengths: ``[S]`` int64, each row's real tokens.
        first_scored: ``[S]`` int64, the first position whose log-prob is wanted (≥ 1: a
            row's first token has no context).
        groups: ``[S]`` int64, rows may share a tree only within a group (the trajectory).

    Returns:
        the trees, each row in exactly one: those with a trunk in order of their first row,
        then one tree without a trunk (``trunk_len = 0``) holding every row that shares
        nothing, sorted by length, so they run batched as plain rows.
    """
    if bool((first_scored < 1).any()):
        raise ValueError("prefix_trees: first_scored must be >= 1 on every row (position 0 has "
                         "no context to predict it from)")
    ids = input_ids.cpu().numpy()
    lengths_np, caps = lengths.cpu().numpy(), (first_scored - 1).cpu().numpy()
    groups_np = groups.cpu().numpy()
    trees: list[PrefixTree] = []
    for group in dict.fromkeys(groups_np.tolist()):
        members: list[int] = []
        attach = np.zeros(0, dtype=np.int64)
        for row in np.flatnonzero(groups_np == group).tolist():
            if not members:  # a lone row runs without a trunk
                members, attach = [row], np.zeros(1, dtype=np.int64)
                continue
            trunk = ids[row, :caps[row]]
            joined = [*members, row]
            width = trunk.shape[0]
            shared = _common_prefix(trunk, ids[joined, :width]) if width else \
                np.zeros(len(joined), dtype=np.int64)
            candidate = np.minimum(shared, caps[joined])
            alone = (attach.max(initial=0) + int((lengths_np[members] - attach).sum())
                     + int(lengths_np[row]))
            together = candidate.max(initial=0) + int((lengths_np[joined] - candidate).sum())
            if together >= alone:
                trees.append(_tree(members, attach))
                members, attach = [row], np.zeros(1, dtype=np.int64)
            else:
                members, attach = joined, candidate
        trees.append(_tree(members, attach))
    shared = [tree for tree in trees if tree.trunk_len]
    alone = [int(row) for tree in trees if not tree.trunk_len for row in tree.rows]
    if alone:  # rows that share nothing run together as plain rows, shortest first
        alone.sort(key=lambda row: int(lengths_np[row]))
        shared.append(PrefixTree(rows=torch.tensor(alone, dtype=torch.long),
                                 attach=torch.zeros(len(alone), dtype=torch.long),
                                 trunk_row=alone[0], trunk_len=0))
    return shared


def _tree(members: list[int], attach: np.ndarray) -> PrefixTree:
    return PrefixTree(rows=torch.tensor(members, dtype=torch.long),
                      attach=torch.from_numpy(attach.astype(np.int64)),
                      trunk_row=members[-1], trunk_len=int(attach.max(initial=0)))


def step_trees(input_ids: Tensor, attention_mask: Tensor, loss_mask: Tensor,
               groups: Tensor, rows: Tensor | None = None) -> list[PrefixTree]:
    """``prefix_trees`` of step rows (``StepTensors``' layout): each row's first scored
    position is its first response token; ``rows`` (default all) picks the rows to lay out,
    in the order given."""
    rows = torch.arange(input_ids.shape[0]) if rows is None else rows
    if not len(rows):
        return []
    mask = loss_mask[rows].bool()
    if not bool(mask.any(1).all()):
        raise ValueError("step_trees: every row needs at least one response token in loss_mask")
    first = mask.to(torch.int64).argmax(1)
    trees = prefix_trees(input_ids[rows], attention_mask[rows].sum(1), first, groups[rows])
    return [PrefixTree(rows=rows[t.rows], attach=t.attach, trunk_row=int(rows[t.trunk_row]),
                       trunk_len=t.trunk_len) for t in trees]


def layout_trees(model, steps, layout: str, rows: Tensor | None = None
                 ) -> list[PrefixTree]:
    """The trees ``rows`` (default all) of ``steps`` run as: each trajectory's prefix trees
    when ``uses_trees(model, layout)``, else one tree without a trunk holding the rows sorted
    by length (plain rows, little padding per forward)."""
    rows = torch.arange(steps.input_ids.shape[0]) if rows is None else rows
    if uses_trees(model, layout):
        return step_trees(steps.input_ids, steps.attention_mask, steps.loss_mask,
                          steps.step_rollout, rows)
    return row_trees(rows, steps.attention_mask)


def row_trees(rows: Tensor, attention_mask: Tensor) -> list[PrefixTree]:
    """``rows`` (indices into ``attention_mask``'s ``[S, L]``) as plain rows: one tree without a
    trunk, its rows sorted by length so that each branch batch holds rows of similar length
    and little padding (none when ``rows`` is empty)."""
    if not len(rows):
        return []
    rows = rows[torch.argsort(attention_mask[rows].sum(1), stable=True)]
    return [PrefixTree(rows=rows, attach=torch.zeros_like(rows), trunk_row=int(rows[0]),
                       trunk_len=0)]


def uses_trees(model, layout: str) -> bool:
    """Whether ``model`` is run as prefix trees under ``optim.layout = layout``: ``trees`` on a
    model ``tree_refusal`` accepts; any other model, and ``rows``, as rows."""
    if layout not in ("trees", "rows"):
        raise ValueError(f"optim.layout = {layout!r}: use trees or rows")
    return layout == "trees" and tree_refusal(model) is None


def tree_refusal(model) -> str | None:
    """Why ``model`` cannot run as prefix trees, or ``None`` when it can: trees need full
    attention in every layer and ``sdpa`` or ``eager`` attention, whose masks take the trunk
    columns a branch may not see as padding."""
    if not has_full_attention(model):
        return "the model has sliding-window attention layers"
    implementation = getattr(getattr(model, "config", None), "_attn_implementation", None)
    if implementation not in ("sdpa", "eager"):
        return (f"its attention implementation {implementation!r} takes no padding mask over "
                "a shared trunk (sdpa and eager do)")
    return None


def layout_line(model, layout: str) -> str:
    """One line saying how every pass over ``model`` lays its rows out under ``optim.layout =
    layout``, and why rows when trees were asked for."""
    if uses_trees(model, layout):
        return "layout: prefix trees"
    if layout == "rows":
        return "layout: rows (optim.layout=rows)"
    return f"layout: rows, not prefix trees: {tree_refusal(model)}"
