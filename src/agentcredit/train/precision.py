"""Mixed precision: a trained policy keeps float32 weights while its forwards compute in
``model.dtype`` (docs/backbones.md §1.1).

AdamW over bfloat16 weights loses every update smaller than half of bfloat16's spacing
around the weight (8 significant bits): at ``lr = 1e-6`` on weights of size ``~0.02`` that
is nearly every update, and the run silently does not learn. So the policy being trained is
loaded in float32 (its gradients and AdamW moments follow it) and ``mixed_precision`` runs
each of its forwards (sampling, scoring, PPO, SFT) under ``torch.autocast`` to the compute
dtype: matmuls in bfloat16, reductions and the residual stream in float32, as verl's FSDP
mixed precision and DeepSpeed's fp32 master weights do. A frozen copy (the reference, an
evaluated checkpoint) has no optimiser and is simply loaded in the compute dtype.

``fp32_lm_head`` computes the logits from float32 hidden states and float32 head weights
(upcast on the fly when the weights are bfloat16) with autocast off, so the log-probs every
pass reads are not rounded to bfloat16 first.
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional as F

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
"""The torch dtype of each ``model.dtype``."""


def mixed_precision(model: nn.Module, compute: torch.dtype, fp32_lm_head: bool) -> nn.Module:
    """Make ``model`` (in place; returned) run its forwards in ``compute``.

    A model whose weights are wider than ``compute`` (float32 weights, bfloat16 compute) runs
    every ``forward`` under autocast to ``compute``; one already in ``compute`` runs as it
    is. With ``fp32_lm_head`` and a ``compute`` other than float32, its output embedding
    computes in float32 (module notes). A float32 model with float32 compute is unchanged:
    the same numbers as without this call.
    """
    weights = next(model.parameters())
    device_type = weights.device.type
    if weights.dtype.itemsize > compute.itemsize:
        forward = model.forward

        @functools.wraps(forward)
        def autocast_forward(*args, **kwargs):
            with torch.autocast(device_type, dtype=compute):
                return forward(*args, **kwargs)

        model.forward = autocast_forward
    if fp32_lm_head and compute != torch.float32:
        head = model.get_output_embeddings()

        def float32_head(hidden: torch.Tensor) -> torch.Tensor:
            """``[..., d] → [..., V]`` logits in float32."""
            bias = None if head.bias is None else head.bias.float()
            with torch.autocast(device_type, enabled=False):
                return F.linear(hidden.float(), head.weight.float(), bias)

        head.forward = float32_head
    return model
