"""Per-token log-probs and entropies of step rows computed as prefix trees (docs/backbones.md §0.1).

``tree_logprobs(model, tree, ...)`` runs one ``train.prefix_tree.PrefixTree``: the trunk once
(a ``[1, A]`` forward whose per-layer keys and values are kept), then the branches in batches
of ``branch_batch`` rows with the trunk's keys and values as their past. Row ``i``'s branch
sees trunk columns ``< a_i`` only (the other trunk columns are masked as padding in the
ordinary 2-D attention mask, which the model's own mask code turns into its causal mask) and
its position ids continue from ``a_i``; so every branch token is computed in exactly the
context it has in its row. The LM head runs only on the columns that predict scored tokens
(``logits_to_keep``), with the temperature and the admissible-set renormalisation of
``scoring.logprobs``.

Gradients: with ``loss`` given, each branch batch's loss is back-propagated at once (its
activations are freed), the gradient reaching the trunk's keys and values is accumulated,
and one backward through the trunk closes the tree; the parameters receive the gradient of
the summed losses exactly as one autograd graph over the tree would give them.

Works for any Hugging Face causal LM with full attention in every layer whose ``forward``
takes ``past_key_values`` (a ``DynamicCache``), ``position_ids``, a 2-D ``attention_mask`` and
``logits_to_keep`` as an index tensor (Qwen2, Llama, Mistral, … in transformers 5), on any
device.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from transformers import DynamicCache

from agentcredit.train.prefix_tree import PrefixTree
from agentcredit.train.scoring.logprobs import logprob_entropy_rows

#: ``loss(rows [b], logprobs [b, l], entropies [b, l] | None) -> scalar``: the loss of one
#: branch batch, its tensors aligned with columns ``0 … l − 1`` of the rows.
BranchLoss = Callable[[Tensor, Tensor, Tensor | None], Tensor]


def tree_logprobs(
    model: nn.Module,
    tree: PrefixTree,
    input_ids: Tensor,
    attention_mask: Tensor,
    score_mask: Tensor,
    *,
    branch_batch: int,
    with_entropy: bool = False,
    allowed: Tensor | None = None,
    temperature: float = 1.0,
    loss: BranchLoss | None = None,
) -> tuple[Tensor, Tensor | None]:
    """``log π(y_l | y_<l)`` (and entropies) of the scored tokens of ``tree``'s rows.

    Args:
        model: a causal LM (see the module docstring).
        tree: the rows and their attachment points (``train.prefix_tree``).
        input_ids: ``[S, L]`` right-padded rows the tree indexes.
        attention_mask: ``[S, L]``, 1 on real tokens.
        score_mask: ``[S, L]`` bool, the tokens whose log-probs are wanted; each must lie at or
            after ``a_i + 1`` of its row (``prefix_trees`` caps the attachments so).
        branch_batch: branches per forward (``≥ 1``).
        with_entropy: also return ``H(π(· | y_<l))`` at the scored tokens.
        allowed: ``[S, L, K]`` allowed ids per token (−1 padded) for admissible decoding.
        temperature: ``T > 0``: the statistics of ``softmax(z / T)``.
        loss: with it, the pass runs with gradients and back-propagates ``loss`` of every
            branch batch (see the module docstring); without it, no gradient is taken.

    Returns:
        ``(logprobs, entropies)`` ``[b, l]`` float32 on the CPU, row ``i`` for ``tree.rows[i]``,
        column ``c`` for column ``c`` of the input (``l`` = the rows' longest length), 0
        off the scored tokens; detached.
    """
    if branch_batch < 1:
        raise ValueError(f"branch_batch={branch_batch} must be >= 1")
    device = next(model.parameters()).device
    lengths = attention_mask[tree.rows].sum(1)  # [b]
    width = int(lengths.max())
    b = len(tree.rows)
    out_lp = torch.zeros((b, width))
    out_ent = torch.zeros((b, width)) if with_entropy else None
    with torch.set_grad_enabled(loss is not None):
        trunk = _trunk(model, input_ids[tree.trunk_row, :tree.trunk_len], device,
                       leaves=loss is not None)
        for start in range(0, b, branch_batch):
            chunk = torch.arange(start, min(start + branch_batch, b))
            lp, ent = _branches(model, trunk, tree.rows[chunk], tree.attach[chunk],
                                lengths[chunk], input_ids, score_mask, allowed, temperature,
                                with_entropy, device)
            if loss is not None:
                loss(tree.rows[chunk], lp, ent).backward()
            out_lp[chunk, :lp.shape[1]] = lp.detach().float().cpu()
            if out_ent is not None and ent is not None:
                out_ent[chunk, :ent.shape[1]] = ent.detach().float().cpu()
        if loss is not None and trunk:
            computed = [t for pair in trunk.computed for t in pair]
            grads = [t.grad for pair in trunk.leaves for t in pair]
            torch.autograd.backward([t for t, g in zip(computed, grads, strict=True)
                                     if g is not None],
                                    [g for g in grads if g is not None])
    return out_lp, out_ent


class _Trunk:
    """The trunk's per-layer ``(keys, values)`` ``[1, heads, A, d]``: ``computed`` in the
    autograd graph of the trunk's forward, ``leaves`` the detached copies the branches read
    (with gradients, their ``.grad`` collects what the branches send back)."""

    def __init__(self, computed: list[tuple[Tensor, Tensor]], leaves: bool) -> None:
        self.computed = computed
        self.leaves = ([(k.detach().requires_grad_(), v.detach().requires_grad_())
                        for k, v in computed] if leaves else computed)
        self.length = computed[0][0].shape[2] if computed else 0

    def __bool__(self) -> bool:
        return self.length > 0


def _trunk(model: nn.Module, ids: Tensor, device: torch.device, leaves: bool) -> _Trunk:
    if not len(ids):
        return _Trunk([], leaves)
    cache = model(input_ids=ids[None].to(device), use_cache=True,
                  position_ids=torch.arange(len(ids), device=device)[None],
                  logits_to_keep=1).past_key_values
    return _Trunk([(layer.keys, layer.values) for layer in cache.layers], leaves)


def _branches(model: nn.Module, trunk: _Trunk, rows: Tensor, attach: Tensor, lengths: Tensor,
              input_ids: Tensor, score_mask: Tensor, allowed: Tensor | None,
              temperature: float, with_entropy: bool, device: torch.device
              ) -> tuple[Tensor, Tensor | None]:
    """One batch of branches: log-probs (and entropies) ``[b, l]`` in row columns."""
    b, span = len(rows), lengths - attach  # [b]
    m = int(span.max())
    steps = torch.arange(m)
    real = steps[None] < span[:, None]  # [b, m]
    columns = (attach[:, None] + steps[None]).clamp(max=input_ids.shape[1] - 1)  # [b, m]
    ids = torch.where(real, input_ids[rows[:, None], columns], 0)
    # branch column k predicts branch token k + 1, at row column attach + k + 1
    wanted = torch.zeros((b, m), dtype=torch.bool)
    wanted[:, 1:] = real[:, 1:] & score_mask[rows[:, None], columns[:, 1:]].bool()
    keep = wanted[:, 1:].any(0).nonzero().flatten()  # logit columns needed
    width = int(lengths.max())
    if not keep.numel():
        empty = torch.zeros((b, width), device=device)
        return empty, (empty if with_entropy else None)
    # the batch reads the trunk up to its furthest attachment only (rows in time order attach
    # further and further, so a batch of neighbours wastes few masked trunk columns)
    seen = int(attach.max())
    trunk_mask = torch.arange(seen)[None] < attach[:, None]  # [b, seen]
    mask = torch.cat([trunk_mask, real], dim=1).long()
    cache = None
    if seen:
        cache = DynamicCache(ddp_cache_data=[(k[:, :, :seen].expand(b, -1, -1, -1),
                                              v[:, :, :seen].expand(b, -1, -1, -1))
                                             for k, v in trunk.leaves])
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                   position_ids=(attach[:, None] + steps[None]).to(device),
                   past_key_values=cache, use_cache=cache is not None,
                   logits_to_keep=keep.to(device)).logits  # [b, k, V]
    k = keep.numel()
    targets = ids[:, keep + 1]  # [b, k]
    target_columns = (attach[:, None] + keep[None] + 1).clamp(max=width - 1)  # [b, k]
    sets = None
    if allowed is not None:
        sets = allowed[rows[:, None], target_columns].reshape(b * k, -1).to(device)
    lp, ent = logprob_entropy_rows(logits.reshape(b * k, -1), targets.reshape(-1).to(device),
                                   with_entropy, sets, temperature)
    hit = wanted[:, keep + 1].to(device)
    index = target_columns.to(device)
    out_lp = torch.zeros((b, width), device=device).scatter_add(
        1, index, torch.where(hit, lp.view(b, k), 0.0))
    out_ent = None
    if ent is not None:
        out_ent = torch.zeros((b, width), device=device).scatter_add(
            1, index, torch.where(hit, ent.view(b, k), 0.0))
    return out_lp, out_ent
