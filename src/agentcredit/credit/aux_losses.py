"""The registry of auxiliary losses added to the PPO loss (``optim.aux_loss``), docs/adrs.md §5.6.

An auxiliary loss is a function of one micro-batch,
``fn(logprobs, teacher, behaviour, mask, coef, normalizer) -> (loss, stats)`` with
``[b, L]`` tensors (``ℓ_θ`` with gradient, ``ℓ^T``, ``ℓ^b``, the valid-token mask), the
weight ``β`` and the mini-batch's ``|V|``; it declares the inputs the trainer must
prepare, as estimators do (``credit.registry``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor

from agentcredit.credit.registry import check_needs
from agentcredit.credit.self_distillation import opsd_loss, sdar_loss, skill_sd_loss

AuxLossFn = Callable[[Tensor, Tensor, Tensor, Tensor, float, Tensor],
                     tuple[Tensor, dict[str, float]]]


@dataclass(frozen=True)
class AuxLoss:
    """A registered auxiliary loss: its name, its function and the inputs it needs."""

    name: str
    fn: AuxLossFn
    needs: frozenset[str]


_AUX_LOSSES: dict[str, AuxLoss] = {}


def register_aux_loss(name: str, needs: tuple[str, ...]) -> Callable[[AuxLossFn], AuxLossFn]:
    """Decorator: register ``fn`` under ``name``; ``needs`` ⊆ ``credit.registry.INPUTS``
    (checked by ``credit.registry.check_needs``)."""
    check_needs(f"auxiliary loss {name!r}", needs)

    def decorator(fn: AuxLossFn) -> AuxLossFn:
        if name in _AUX_LOSSES or name == "none":
            raise ValueError(f"auxiliary loss {name!r} is already registered; pick another name")
        _AUX_LOSSES[name] = AuxLoss(name, fn, frozenset(needs))
        return fn

    return decorator


def get_aux_loss(name: str) -> AuxLoss:
    """The auxiliary loss registered under ``name``; a ``KeyError`` lists the known names."""
    try:
        return _AUX_LOSSES[name]
    except KeyError:
        raise KeyError(f"unknown auxiliary loss {name!r}; known: "
                       f"{', '.join(aux_loss_names())}") from None


def aux_loss_names() -> list[str]:
    """Sorted names of the registered auxiliary losses."""
    return sorted(_AUX_LOSSES)


@register_aux_loss("opsd", needs=("teacher",))
def opsd(logprobs: Tensor, teacher: Tensor, behaviour: Tensor, mask: Tensor, coef: float,
         normalizer: Tensor) -> tuple[Tensor, dict[str, float]]:
    """On-policy self-distillation toward ``ℓ^T`` (``self_distillation.opsd_loss``)."""
    return opsd_loss(logprobs, teacher, mask, coef, normalizer=normalizer)


@register_aux_loss("sdar", needs=("teacher",))
def sdar(logprobs: Tensor, teacher: Tensor, behaviour: Tensor, mask: Tensor, coef: float,
         normalizer: Tensor) -> tuple[Tensor, dict[str, float]]:
    """The confidence-gated variant, gate ``sigmoid(τ(ℓ^T − ℓ^b))``
    (``self_distillation.sdar_loss``)."""
    return sdar_loss(logprobs, teacher, behaviour, mask, coef, normalizer=normalizer)


@register_aux_loss("skill_sd", needs=("teacher",))
def skill_sd(logprobs: Tensor, teacher: Tensor, behaviour: Tensor, mask: Tensor, coef: float,
             normalizer: Tensor) -> tuple[Tensor, dict[str, float]]:
    """Skill-SD's importance-weighted k3 distillation toward ``ℓ^T``
    (``self_distillation.skill_sd_loss``)."""
    return skill_sd_loss(logprobs, teacher, behaviour, mask, coef, normalizer=normalizer)
