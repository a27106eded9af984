"""Witness weights ``ω_{i,t,j}`` from a rollout's proof edges (docs/vict.md §4.3, 4.6).

The trace (``verifier/trace.py``) finds the edges and checks each proof
record; this module turns the valid ones into per-atom witness weights.
[choice] When several relations link the same step to the same atom (a final
move that both writes the placement and commits it), ``ω_{i,t,j}`` is the sum of
their weights: each relation is an independent witness.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentcredit.verifier.trace import RolloutTrace


@dataclass(frozen=True)
class Witness:
    """The credit-bearing link of one step to one atom.

    Attributes:
        step: ``t`` in the rollout.
        weight: ``ω_{i,t,j}`` (> 0).
        relations: the relations behind it (``("write", "commit")``), or the name
            of a control's rule (``"commit"``, ``"nearest"``, ``"spread"``).
        sources: the evidence behind each relation, for the ledger.
    """

    step: int
    weight: float
    relations: tuple[str, ...]
    sources: tuple[str, ...]


def proof_witnesses(trace: RolloutTrace) -> dict[str, list[Witness]]:
    """VICT's witnesses: per atom id, one ``Witness`` per step with a valid proof edge, by step."""
    merged: dict[tuple[str, int], list] = {}
    for edge in trace.edges:  # edges come in step order
        if not edge.valid or edge.weight <= 0:
            continue
        entry = merged.get((edge.atom_id, edge.step))
        if entry is None:
            merged[edge.atom_id, edge.step] = [edge.weight, [edge.relation], [edge.source]]
        else:
            entry[0] += edge.weight
            entry[1].append(edge.relation)
            entry[2].append(edge.source)
    out: dict[str, list[Witness]] = {}
    for (atom_id, step), (weight, relations, sources) in merged.items():
        out.setdefault(atom_id, []).append(Witness(step, weight, tuple(relations), tuple(sources)))
    return out
