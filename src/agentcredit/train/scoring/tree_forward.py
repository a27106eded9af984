"""The one forward every pass that scores tokens runs: rows laid out as prefix trees
(docs/backbones.md §0.1).

The behaviour, reference, teacher and hindsight passes, the PPO and SFT updates, the
evaluation probes and the credit check all score tokens of right-padded rows (``Rows``) laid
out as ``train.prefix_tree.PrefixTree`` s; under ``optim.layout=rows`` every row is a tree
without a trunk. A tree runs in two parts:

- ``trunk_forward``: the trunk's tokens once, a ``[1, A]`` forward whose per-layer keys and
  values are kept (a ``Trunk``). It may continue a ``past`` trunk that every row of the tree
  sees whole: the teacher's per-task skill prefix, computed once for all the task's rows.
- ``branch_forward``: a batch of the tree's rows from their attachment points on, with the
  trunk's keys and values as their past. Row ``i`` sees trunk columns ``< a_i`` only (the
  other trunk columns are masked as padding in the ordinary 2-D attention mask, which the
  model's own mask code turns into its causal mask) and its position ids continue from
  ``a_i``; so every token is computed in exactly the context it has in its row. The LM head
  runs only on the columns that predict scored tokens (``logits_to_keep``), with the
  temperature and the admissible-set renormalisation of ``scoring.logprobs``.

Gradients: a training loop calls ``trunk_forward(..., grad=True)``, then for each branch
batch ``branch_forward``, its loss and ``loss.backward()``. The branches send their gradient to
the trunk's detached keys and values (``Trunk.leaves``), and ``Trunk.backward()`` carries the
sum into the trunk's forward once, after the tree's last branch batch: the parameters get the
gradient of the summed losses that one autograd graph over the tree would give, while only
one branch batch's activations are held at a time.

``score_trees`` is every pass without gradient: each tree's trunk and branch batches, gathered
into ``[S, L]``.

Works for any Hugging Face causal LM with full attention in every layer whose ``forward``
takes ``past_key_values`` (a ``DynamicCache``), ``position_ids``, a 2-D ``attention_mask`` and
``logits_to_keep`` as an index tensor (Qwen2, Llama, Mistral, … in transformers 5), on any
device; a tree without a trunk and without a past (a plain row) runs on any causal LM.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from transformers import DynamicCache, DynamicLayer

from agentcredit.train.prefix_tree import PrefixTree
from agentcredit.train.scoring.logprobs import logprob_entropy_rows


@dataclass(frozen=True, eq=False)
class Rows:
    """The right-padded rows a pass scores, row-aligned. A batch's step rows
    (``train.step_tensors.StepTensors``) are ``Rows``, with what each step adds; the teacher's
    privileged rows are plain ``Rows`` (``scoring.teacher``).

    Attributes:
        input_ids: ``[S, L]`` int64 token ids.
        attention_mask: ``[S, L]``, 1 on real tokens (a prefix of each row).
        loss_mask: ``[S, L]`` bool, the tokens whose log-probs are wanted (a step's response
            tokens, the ones its loss trains); each must lie at or after ``a_i + 1`` of its
            tree (``prefix_trees`` caps the attachments so).
        allowed: ``[S, L, K]`` allowed ids per token (−1 padded) under admissible decoding,
            or ``None``: the whole vocabulary.
    """

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor
    allowed: Tensor | None = None


class Trunk:
    """A prefix's per-layer keys and values ``[1, heads, P, d]``, as the branches read them.

    Attributes:
        computed: the keys and values in the autograd graph of the forward that made them.
        leaves: what the branches read: with gradients, detached copies whose ``.grad``
            collects what the branches send back; without, ``computed`` itself.
        past: ``P_0``, the leading columns every row sees whole (a ``past`` trunk's length).
        length: ``P``, every column (``past`` plus the tree's own trunk).
    """

    def __init__(self, computed: list[tuple[Tensor, Tensor]], grad: bool, past: int) -> None:
        self.computed = computed
        self.leaves = ([(k.detach().requires_grad_(), v.detach().requires_grad_())
                        for k, v in computed] if grad else computed)
        self.past = past
        self.length = computed[0][0].shape[2] if computed else 0

    def seen_whole(self) -> Trunk:
        """This trunk as the past of a tree without a trunk of its own: every row sees all of
        its columns."""
        view = copy.copy(self)
        view.past = self.length
        return view

    def backward(self) -> None:
        """Carry the gradient the branch batches left on ``leaves`` into the trunk's forward;
        call once, after the tree's last branch batch (nothing to do without gradients)."""
        pairs = [(t, leaf.grad) for computed, leaves in zip(self.computed, self.leaves,
                                                             strict=True)
                 for t, leaf in zip(computed, leaves, strict=True)
                 if leaf is not t and leaf.grad is not None]
        if pairs:
            torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])


def trunk_forward(model: nn.Module, ids: Tensor, *, grad: bool = False,
                  past: Trunk | None = None) -> Trunk:
    """The keys and values of ``ids`` ``[A]`` after ``past`` (at positions ``P_0 … P_0 + A − 1``).

    ``grad`` keeps the forward's graph for ``Trunk.backward``. With ``A = 0`` the trunk is
    ``past`` itself (or empty).
    """
    offset = past.length if past is not None else 0
    if not len(ids):
        return past.seen_whole() if past is not None else Trunk([], grad, 0)
    device = next(model.parameters()).device
    cache = _cache_holding(past.leaves) if past is not None and past.length else None
    with torch.set_grad_enabled(grad):
        out = model(input_ids=ids[None].to(device), past_key_values=cache, use_cache=True,
                    position_ids=torch.arange(offset, offset + len(ids), device=device)[None],
                    logits_to_keep=1).past_key_values
    return Trunk([(layer.keys, layer.values) for layer in out.layers], grad, offset)


def trunk_of(model: nn.Module, tree: PrefixTree, rows: Rows, *, grad: bool = False,
             past: Trunk | None = None) -> Trunk:
    """``trunk_forward`` of ``tree``'s trunk: row ``tree.trunk_row``'s first ``A`` tokens."""
    return trunk_forward(model, rows.input_ids[tree.trunk_row, :tree.trunk_len], grad=grad,
                         past=past)


def branch_forward(model: nn.Module, trunk: Trunk, tree: PrefixTree, batch: Tensor, rows: Rows,
                   *, with_entropy: bool = False, entropy_grad: bool = True,
                   temperature: float = 1.0) -> tuple[Tensor, Tensor | None]:
    """``log π(y_l | y_<l)`` (and ``H(π(· | y_<l))``) of the scored tokens of one branch batch.

    Args:
        model: the causal LM (see the module docstring).
        trunk: ``trunk_of(model, tree, rows)`` (with gradients if the loss wants them).
        tree: the tree; ``batch`` ``[b]`` indexes its ``rows`` (``PrefixTree.batches``).
        rows: the rows the tree indexes.
        with_entropy: also the entropies at the scored tokens.
        entropy_grad: the entropies in the autograd graph (a loss term); ``False`` computes
            them from the detached logits without one (a logged figure: no ``[b·k, V]``
            softmax is kept for the backward). The same numbers either way.
        temperature: ``T > 0``: the statistics of ``softmax(z / T)``.

    Returns:
        ``(logprobs, entropies)`` ``[b, w]`` float32 on the model's device, in the autograd
        graph when gradients are on: row ``i`` for ``tree.rows[batch[i]]``, column ``c`` for
        column ``c`` of the input (``w`` = the batch's longest row), 0 off the scored tokens.
    """
    device = next(model.parameters()).device
    members = tree.rows[batch]
    attach = tree.attach[batch]
    lengths = rows.attention_mask[members].sum(1)  # [b]
    b, span = len(members), lengths - attach  # [b]
    width = int(lengths.max())
    m = int(span.max())
    steps = torch.arange(m)
    real = steps[None] < span[:, None]  # [b, m]
    columns = (attach[:, None] + steps[None]).clamp(max=rows.input_ids.shape[1] - 1)  # [b, m]
    ids = torch.where(real, rows.input_ids[members[:, None], columns], 0)
    # branch column k predicts branch token k + 1, at row column attach + k + 1
    wanted = torch.zeros((b, m), dtype=torch.bool)
    wanted[:, 1:] = real[:, 1:] & rows.loss_mask[members[:, None], columns[:, 1:]].bool()
    keep = wanted[:, 1:].any(0).nonzero().flatten()  # logit columns needed
    if not keep.numel():
        empty = torch.zeros((b, width), device=device)
        return empty, (empty if with_entropy else None)
    # the batch reads the trunk up to its furthest attachment only (rows in time order attach
    # further and further, so a batch of neighbours wastes few masked trunk columns)
    seen = trunk.past + int(attach.max())
    trunk_mask = torch.cat([torch.ones((b, trunk.past), dtype=torch.bool),
                            torch.arange(seen - trunk.past)[None] < attach[:, None]], dim=1)
    mask = torch.cat([trunk_mask, real], dim=1).long()  # [b, seen + m]
    cache = None
    if seen:
        cache = _cache_holding([(k[:, :, :seen].expand(b, -1, -1, -1),
                                 v[:, :, :seen].expand(b, -1, -1, -1)) for k, v in trunk.leaves])
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                   position_ids=(trunk.past + attach[:, None] + steps[None]).to(device),
                   past_key_values=cache, use_cache=cache is not None,
                   logits_to_keep=keep.to(device)).logits  # [b, k, V]
    k = keep.numel()
    targets = ids[:, keep + 1]  # [b, k]
    target_columns = (attach[:, None] + keep[None] + 1).clamp(max=width - 1)  # [b, k]
    sets = None
    if rows.allowed is not None:
        sets = rows.allowed[members[:, None], target_columns].reshape(b * k, -1).to(device)
    flat, targets = logits.reshape(b * k, -1), targets.reshape(-1).to(device)
    lp, ent = logprob_entropy_rows(flat, targets, with_entropy and entropy_grad, sets,
                                   temperature)
    if with_entropy and not entropy_grad:
        with torch.no_grad():
            _, ent = logprob_entropy_rows(flat.detach(), targets, True, sets, temperature)
    hit = wanted[:, keep + 1].to(device)
    index = target_columns.to(device)
    out_lp = torch.zeros((b, width), device=device).scatter_add(
        1, index, torch.where(hit, lp.view(b, k), 0.0))
    out_ent = None
    if ent is not None:
        out_ent = torch.zeros((b, width), device=device).scatter_add(
            1, index, torch.where(hit, ent.view(b, k), 0.0))
    return out_lp, out_ent


def _cache_holding(pairs: Sequence[tuple[Tensor, Tensor]]) -> DynamicCache:
    """A ``DynamicCache`` whose layer ``l`` holds ``pairs[l]`` (keys, values) as they are: a
    view stays a view (``DynamicCache(ddp_cache_data=…)`` would copy each), so a branch batch's
    expanded trunk costs no memory until its layers concatenate their own keys and values."""
    cache = DynamicCache()
    for keys, values in pairs:
        layer = DynamicLayer()
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
        cache.layers.append(layer)
    return cache


def score_trees(model: nn.Module, trees: Sequence[PrefixTree], rows: Rows, *,
                branch_batch: int, temperature: float = 1.0, past: Trunk | None = None
                ) -> Tensor:
    """``log π(y_l | y_<l)`` of the scored tokens of every row of ``trees``, no gradient.

    Args:
        model: the causal LM; its train/eval mode is left as the caller set it.
        trees: the layout (``train.prefix_tree``); rows outside every tree stay 0.
        rows: the rows the trees index.
        branch_batch: rows per branch forward (``≥ 1``; the result does not depend on it).
        temperature: ``T > 0``: the log-probs of ``softmax(z / T)``.
        past: a trunk every row continues (the teacher's per-task prefix), or ``None``.

    Returns:
        float32 ``[S, L]`` on the CPU, 0 off the scored tokens.
    """
    if branch_batch < 1:
        raise ValueError(f"branch_batch={branch_batch} must be >= 1")
    out = torch.zeros(rows.input_ids.shape, dtype=torch.float32)
    with torch.no_grad():
        for tree in trees:
            trunk = trunk_of(model, tree, rows, past=past)
            for batch in tree.batches(branch_batch):
                logprobs, _ = branch_forward(model, trunk, tree, batch, rows,
                                             temperature=temperature)
                out[tree.rows[batch], :logprobs.shape[1]] = logprobs.float().cpu()
    return out
