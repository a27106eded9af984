"""The credit ledger: every non-zero VICT correction, auditable (docs/vict.md §4.7).

``ledger_rows`` turns one computation into rows, one per (step, atom) share of
a non-zero correction, with docs/vict.md §4.7 fields:

| field | meaning |
| --- | --- |
| ``method`` | ``vict`` or the control that produced the row |
| ``task_id``, ``group_id``, ``rollout``, ``step``, ``action`` | where the credit went |
| ``atom_id``, ``relation``, ``evidence_source`` | the proof: atom, witness relation(s), evidence |
| ``irreversible`` | the atom's irreversibility flag (VICT paper Table 9; ``Atom.irreversible``) |
| ``delta_hat`` | ``δ̂_{i,j}``, the atom's normalised marginal |
| ``witness_weight``, ``witness_share`` | ``ω_{i,t,j}`` and ``ω_{i,t,j} / Z_{i,j}`` |
| ``atom_credit`` | ``δ̂_{i,j} · ω_{i,t,j} / Z_{i,j}``, this atom's part of ``A^VICT_{i,t}`` |
| ``vict_advantage`` | ``A^VICT_{i,t}`` (all atoms of the step) |
| ``correction`` | ``λ · clip(A^VICT_{i,t}, −c, c)``, the final correction of the step |
| ``base_advantage`` | ``A^base_{i,t}`` |

The trainer appends the rows to ``ledger.jsonl`` with ``jsonl_log.JsonlLog``, the
crash-safe writer it shares with ``metrics.jsonl``; ``jsonl_log.read_jsonl`` reads
them back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentcredit.credit.batch import CreditBatch
    from agentcredit.credit.vict.method import VictComputation

LEDGER_FIELDS = ("method", "task_id", "group_id", "rollout", "step", "action", "atom_id",
                 "relation", "evidence_source", "irreversible", "delta_hat", "witness_weight",
                 "witness_share", "atom_credit", "vict_advantage", "correction", "base_advantage")


def ledger_rows(batch: CreditBatch, computation: VictComputation) -> list[dict[str, Any]]:
    """One row per (step, atom) share of every step whose final correction is non-zero."""
    correction = computation.correction.tolist()
    vict = computation.vict.tolist()
    base = computation.base.tolist()
    group_ids = batch.group_ids.tolist()
    traces = batch.traces
    rows = []
    for c in computation.contributions:
        if correction[c.flat_step] == 0.0:
            continue
        trace = traces[c.rollout]
        rows.append({
            "method": computation.rule.name,
            "task_id": trace.task_id,
            "group_id": group_ids[c.rollout],
            "rollout": c.rollout,
            "step": c.step,
            "action": trace.actions[c.step],
            "atom_id": c.atom_id,
            "relation": "+".join(c.relations),
            "evidence_source": "; ".join(c.sources),
            "irreversible": trace.atom(c.atom_id).irreversible,
            "delta_hat": c.delta_hat,
            "witness_weight": c.weight,
            "witness_share": c.share,
            "atom_credit": c.amount,
            "vict_advantage": vict[c.flat_step],
            "correction": correction[c.flat_step],
            "base_advantage": base[c.flat_step],
        })
    return rows
