"""VICT: verifier-instrumented credit tracing (docs/vict.md §4), its controls, ledger and audit.

Importing this package registers the estimators ``vict`` and docs/vict.md §4.8
controls ``dense_atom_reward``, ``commit_only``, ``temporal_nearest``,
``random_edges``, ``no_core`` and ``no_proof_edges``; all take a ``VICTConfig``
and a ``CreditBatch`` whose ``traces`` hold one ``RolloutTrace`` per rollout
(``agentcredit.verifier.trace.trace_rollout``).

Modules: ``config`` (options), ``core`` (direction, magnitude, greedy core),
``normalise`` (δ̂), ``edges`` (witness weights), ``correction`` (A^VICT, λ, c,
eligibility), ``method`` (the pipeline), ``estimator`` (``vict``: the pipeline
with its ledger rows and diagnostics), ``ablations``, ``ledger`` (rows and the
crash-safe writer), ``diagnostics`` (docs/vict.md §4.9 and the interface audit).
"""

from agentcredit.credit.vict import ablations  # noqa: F401  (registers the controls)
from agentcredit.credit.vict.ablations import ABLATIONS
from agentcredit.credit.vict.config import VICTConfig
from agentcredit.credit.vict.correction import EligibilityError
from agentcredit.credit.vict.diagnostics import (
    AuditRow,
    credit_diagnostics,
    format_audit_table,
    interface_audit,
)
from agentcredit.credit.vict.estimator import vict
from agentcredit.credit.vict.method import ABSTAIN_REASONS, compute_credit

__all__ = [
    "ABLATIONS",
    "ABSTAIN_REASONS",
    "AuditRow",
    "EligibilityError",
    "VICTConfig",
    "compute_credit",
    "credit_diagnostics",
    "format_audit_table",
    "interface_audit",
    "vict",
]
