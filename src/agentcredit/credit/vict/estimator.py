"""The ``vict`` estimator: one VICT computation packaged as a ``CreditResult``
(docs/vict.md §4.7, 4.9).

``method.compute_credit`` decides the credit; ``credit_result`` adds what a
trainer logs — the ledger rows (``ledger.py``) and the diagnostics
(``diagnostics.py``) — and is shared by ``vict`` and the controls of docs/vict.md §4.8
(``ablations.py``).
"""

from __future__ import annotations

from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.registry import register_estimator
from agentcredit.credit.result import CreditResult
from agentcredit.credit.vict.config import VICTConfig
from agentcredit.credit.vict.diagnostics import credit_diagnostics
from agentcredit.credit.vict.ledger import ledger_rows
from agentcredit.credit.vict.method import VICT_RULE, VictComputation, compute_credit


def credit_result(batch: CreditBatch, computation: VictComputation) -> CreditResult:
    """Package a computation as a ``CreditResult`` (advantages, diagnostics, ledger rows)."""
    dtype = computation.base.dtype
    diagnostics = credit_diagnostics(batch, computation)
    diagnostics.update({f"base/{k}": v for k, v in computation.backbone.diagnostics.items()})
    extras = dict(computation.backbone.extras)
    extras.update({"base_advantage": computation.base,
                   "vict_advantage": computation.vict.to(dtype),
                   "correction": computation.correction})
    return CreditResult(step_advantages=computation.final.detach(), diagnostics=diagnostics,
                        extras=extras, ledger_rows=ledger_rows(batch, computation))


@register_estimator("vict", VICTConfig, needs=("traces",),
                    claims=("step_credit", "permutation", "constant_group_zero"))
def vict(batch: CreditBatch, config: VICTConfig) -> CreditResult:
    """VICT advantages ``A^final_{i,t} = A^base_{i,t} + λ · clip(A^VICT_{i,t}, −c, c)``
    (docs/vict.md §4).

    Needs ``batch.traces``. Returns ``step_advantages [S]`` = ``A^final``;
    ``extras``: ``base_advantage``, ``vict_advantage`` (``A^VICT``),
    ``correction`` (all ``[S]``) plus the backbone's extras; ``ledger_rows``:
    one row per (step, atom) share of every non-zero correction (docs/vict.md §4.7);
    ``diagnostics``: docs/vict.md §4.9 under ``vict/…`` and the backbone's under ``base/…``.
    Raises ``EligibilityError`` if a non-zero correction lacks a proof.
    """
    return credit_result(batch, compute_credit(batch, config, VICT_RULE))
