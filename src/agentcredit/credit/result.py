"""The output of every credit estimator (docs/design.md, "Key records")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor


@dataclass
class CreditResult:
    """Advantages plus what a run logs about how they were made.

    Attributes:
        step_advantages: ``[S]`` float, ``A_{i,t}`` per step, aligned with the
            batch's flat steps; broadcast to every valid token of the step's
            response unless ``token_advantages`` is set. Always detached.
        token_advantages: per-token advantages for methods that credit tokens
            individually (ADRS); ``None`` when the step advantage is broadcast.
        diagnostics: scalar metrics for ``metrics.jsonl`` (name → float).
        extras: tensors a later stage needs (GiGPO: ``anchor_group_ids [S]`` and
            ``return_to_go [S]`` for ADRS's L3 gate).
        ledger_rows: credit-ledger rows (VICT, docs/vict.md §4.7); empty otherwise.
    """

    step_advantages: Tensor
    token_advantages: Tensor | None = None
    diagnostics: dict[str, float] = field(default_factory=dict)
    extras: dict[str, Tensor] = field(default_factory=dict)
    ledger_rows: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        advantages = self.step_advantages
        if not isinstance(advantages, Tensor) or advantages.dim() != 1 \
                or not advantages.is_floating_point():
            got = (f"dtype {advantages.dtype} shape {tuple(advantages.shape)}"
                   if isinstance(advantages, Tensor) else type(advantages).__name__)
            raise ValueError(
                f"CreditResult.step_advantages must be a 1-D float tensor [S]; got {got}. "
                "Return one advantage per step of the batch."
            )
