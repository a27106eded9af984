"""The checks credit's records run on their tensors when they are built (``HindsightScores``,
``TokenScores``, ``CreditResult``): each failure is one ``ValueError`` that names the field,
says what it holds and what it should hold, and how to fix it."""

from __future__ import annotations

import torch
from torch import Tensor


def check_float_vector(value: object, name: str, expected: str, *, length: int | None = None,
                       fix: str = "") -> None:
    """Raise unless ``value`` is a 1-D floating-point tensor (of ``length`` entries when given):
    ``"{name} must be a 1-D float tensor {expected}; got {dtype and shape, or type}."``, then
    ``fix``."""
    if isinstance(value, Tensor) and value.dim() == 1 and value.is_floating_point() \
            and (length is None or value.shape[0] == length):
        return
    got = (f"dtype {value.dtype} shape {tuple(value.shape)}" if isinstance(value, Tensor)
           else type(value).__name__)
    raise ValueError(f"{name} must be a 1-D float tensor {expected}; got {got}."
                     + (f" {fix}" if fix else ""))


def check_finite(value: Tensor, name: str, fix: str) -> None:
    """Raise at the first entry of ``value`` that is not finite:
    ``"{name}[i] = {entry} is not finite; {fix}."``"""
    if not torch.isfinite(value).all():
        bad = int(torch.nonzero(~torch.isfinite(value))[0])
        raise ValueError(f"{name}[{bad}] = {value[bad].item()} is not finite; {fix}.")


def check_on_device(value: Tensor, name: str, device: torch.device | str) -> None:
    """Raise unless ``value`` is on the batch's ``device``."""
    if value.device != torch.device(device):
        raise ValueError(f"{name} is on {value.device} but the batch is on {device}; move it "
                         "with .to(device).")
