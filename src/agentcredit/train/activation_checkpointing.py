"""Gradient checkpointing of the decoder layers, correct with the tree forward's caches
(``optim.gradient_checkpointing``, docs/backbones.md §0.1).

Inside ``recomputed_layers(model)`` every decoder layer of ``model`` runs under
``torch.utils.checkpoint`` (non-reentrant): the forward keeps the layer's input and none of its
intermediates (attention keys, queries, scores, MLP activations), and the backward runs the
layer again to get them back. Activation memory falls from every layer's intermediates to one
layer's at a time, for one more forward of each layer in the backward; the gradients are the
same, because the recompute repeats the forward's computation exactly (the checkpoint restores
the RNG and autocast state, and checks that every recomputed tensor has the shape and dtype
the forward saved).

Hugging Face's own ``gradient_checkpointing_enable`` cannot run the tree forward: in training
mode its ``GradientCheckpointingLayer`` sets ``use_cache=False`` and ``past_key_values=None``,
so a trunk would hand out no keys and values and a branch would not see its trunk. A plain
checkpoint around a layer is no better: the recompute calls the layer with the same
``DynamicCache``, whose update appends the layer's keys and values a second time (``torch.cat``
onto what the forward already appended), so the recomputed attention reads ``2·n`` new
columns, not ``n``.

So each run of a layer gets a cache of its own, made idempotent: a shallow copy of the
forward's cache as it was when the layer was first called (``seen``: the same tensors, never
copied; the trunk's keys and values a branch reads, a ``past`` trunk, or nothing). The first
run's updated layers are written back into the forward's cache, which the model returns (a
trunk's keys and values are those tensors, in the autograd graph). A recompute runs on a new
copy of ``seen``, so it appends to exactly what the first run appended to, and writes nothing
back: no cache anybody reads changes in the backward. The checkpoint holds neither the
forward's cache nor, after the first run, ``seen``'s entries for the other layers (only the
layer's own: views of the trunk, or nothing), so a branch's full keys and values
``[b, heads, trunk + branch, d]`` are freed after the forward like every other intermediate.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers.modeling_layers import GradientCheckpointingLayer


@contextmanager
def recomputed_layers(model: nn.Module, enabled: bool = True) -> Iterator[None]:
    """Run ``model``'s decoder layers with gradient checkpointing while the context is open
    (module docstring); ``enabled=False`` leaves the model as it is. Either way a model with
    Hugging Face's own checkpointing on is refused (it drops the caches the trees need).

    Only forwards with gradients are checkpointed; a no-grad forward inside the context runs
    as usual. The layers are Hugging Face's ``GradientCheckpointingLayer`` s (every decoder
    layer of a transformers 5 causal LM); a model without any cannot be checkpointed.
    """
    layers = [module for module in model.modules()
              if isinstance(module, GradientCheckpointingLayer)]
    if any(layer.gradient_checkpointing for layer in layers):
        raise ValueError("the model has Hugging Face's gradient checkpointing on, which drops "
                         "the caches the tree forward needs: call "
                         "model.gradient_checkpointing_disable() and use "
                         "optim.gradient_checkpointing")
    if not enabled:
        yield
        return
    if not layers:
        raise ValueError(f"optim.gradient_checkpointing: {type(model).__name__} has no "
                         "transformers decoder layers (GradientCheckpointingLayer) to "
                         "checkpoint; set optim.gradient_checkpointing=false")
    # a layer's own forward, when something (not this context) set one on the instance
    own = [layer.__dict__.get("forward") for layer in layers]
    for layer in layers:
        layer.forward = _checkpointed(layer.forward)
    try:
        yield
    finally:
        for layer, forward in zip(layers, own, strict=True):
            if forward is None:
                del layer.forward
            else:
                layer.forward = forward


def _checkpointed(forward: Callable) -> Callable:
    """``forward`` (a decoder layer's) run under a non-reentrant checkpoint, on a cache of its
    own per run (module docstring)."""

    def run_checkpointed(*args, **kwargs):
        if not torch.is_grad_enabled():
            return forward(*args, **kwargs)
        cache = kwargs.pop("past_key_values", None)
        if cache is None:
            return checkpoint(forward, *args, use_reentrant=False, **kwargs)
        # the cache as this layer first sees it: new layer objects, the same tensors
        seen = copy.copy(cache)
        seen.layers = [copy.copy(layer) for layer in cache.layers]
        unwritten = [cache]  # the forward's cache, until the first run wrote into it

        def run(*inner_args, **inner_kwargs):
            own = copy.copy(seen)
            own.layers = [copy.copy(layer) for layer in seen.layers]
            out = forward(*inner_args, past_key_values=own, **inner_kwargs)
            if unwritten:  # the first run; a recompute leaves every cache as it is
                unwritten.pop().layers[:] = own.layers
                # keep only the entries this layer updated: the others would hold the earlier
                # layers' keys and values until the backward (a recompute reading one fails)
                seen.layers = [before if _updated(before, after) else None
                               for before, after in zip(seen.layers, own.layers[:len(seen.layers)],
                                                        strict=True)]
            return out

        return checkpoint(run, *args, use_reentrant=False, **kwargs)

    return run_checkpointed


def _updated(before, after) -> bool:
    """Whether a cache layer's update rebound any of ``before``'s attributes in ``after``, its
    copy (``DynamicLayer.update`` rebinds ``keys`` and ``values`` to ``torch.cat`` results)."""
    state = vars(after)
    return vars(before).keys() != state.keys() or any(
        state[name] is not value for name, value in vars(before).items())
