"""The output of every credit estimator (docs/design.md, "Records")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from agentcredit.credit.tensor_checks import check_float_vector
from agentcredit.credit.tokens import to_step_rows


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
        check_float_vector(self.step_advantages, "CreditResult.step_advantages", "[S]",
                           fix="Return one advantage per step of the batch.")

    def per_token(self, loss_mask: Tensor) -> Tensor:
        """The advantage of every response token, ``[S, L]`` float32, 0 off ``loss_mask``.

        ``loss_mask [S, L]`` marks each flat step's response tokens (``StepTensors.loss_mask``,
        or verl's response mask in flat step order). Token advantages (ADRS) go to their
        tokens (``to_step_rows``); otherwise each step's advantage is broadcast over its
        response. The write-back both the embedded trainer and verl use; tested property: a
        step-level result's row ``s`` sums to ``A_s · |y_s|``.
        """
        if self.token_advantages is not None:
            return to_step_rows(self.token_advantages.to(torch.float32), loss_mask)
        return self.step_advantages[:, None].to(torch.float32) * loss_mask.to(torch.float32)
