"""Grouped-query attention that reads each key/value head once, for sampling with a KV cache.

Transformers' ``sdpa`` attention copies every key/value head ``H / H_kv`` times
(``repeat_kv``) before it calls ``scaled_dot_product_attention`` whenever there is an
attention mask, and batched sampling always has one (left padding). At every decoding
step that copies the whole KV cache, ``[B, H_kv, L, d]`` twice per layer, which on a CPU
costs more than the attention itself. ``grouped_sdpa`` computes the same attention without
the copy: the ``G = H / H_kv`` query heads that share key/value head ``k`` (heads
``k·G … k·G + G − 1``, the grouping of ``repeat_kv``) are folded into the query-length
axis,

    q ``[B, H, q, d]`` → ``[B, H_kv, G·q, d]``,   mask ``[B, 1, q, L]`` → ``[B, 1, G·q, L]``,

so one ``scaled_dot_product_attention`` call over the un-copied keys ``[B, H_kv, L, d]``
gives every head's output: each folded row attends exactly as its head's row did, so the
result equals ``sdpa``'s to float rounding (the kernel's summation order).

``grouped_attention(model)`` switches a model whose attention is ``sdpa`` to this function
for the duration of a ``with`` block (the sampler's); any other implementation (eager,
flash attention) is left as it is. Works on every device ``scaled_dot_product_attention``
runs on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import Tensor
from torch.nn.functional import scaled_dot_product_attention
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

GROUPED_SDPA = "agentcredit_grouped_sdpa"


def grouped_sdpa(module, query: Tensor, key: Tensor, value: Tensor,
                 attention_mask: Tensor | None, dropout: float = 0.0,
                 scaling: float | None = None, is_causal: bool | None = None,
                 **kwargs) -> tuple[Tensor, None]:
    """Attention of ``query [B, H, q, d]`` over ``key, value [B, H_kv, L, d]`` under the boolean
    ``attention_mask [B, 1, q, L]`` (True = attend), as transformers' ``sdpa_attention_forward``
    computes it; returns ``([B, q, H, d], None)``.

    Without a mask, or without grouping (``H = H_kv``), it is ``sdpa_attention_forward``
    itself (which then needs no copy either).
    """
    batch, heads, length, dim = query.shape
    groups = heads // key.shape[1]
    if attention_mask is None or groups == 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    folded = query.reshape(batch, key.shape[1], groups * length, dim)  # [B, H_kv, G·q, d]
    mask = attention_mask.repeat(1, 1, groups, 1)  # [B, 1, G·q, L]: row g·q + i is row i
    out = scaled_dot_product_attention(folded, key, value, attn_mask=mask, dropout_p=dropout,
                                       scale=scaling)  # [B, H_kv, G·q, d]
    return out.reshape(batch, heads, length, dim).transpose(1, 2).contiguous(), None


AttentionInterface.register(GROUPED_SDPA, grouped_sdpa)
AttentionMaskInterface.register(GROUPED_SDPA, sdpa_mask)


@contextlib.contextmanager
def grouped_attention(model) -> Iterator[None]:
    """Within the block, ``model`` (an ``sdpa`` transformers model) attends with ``grouped_sdpa``;
    its implementation is restored afterwards. Other models are left untouched."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa":
        yield
        return
    config._attn_implementation = GROUPED_SDPA
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"
