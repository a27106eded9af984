"""Environment-independent aggregators ``F`` over terminal atom statuses (docs/vict.md §4.1).

An aggregator is a frozen dataclass of plain fields with
``__call__(statuses: Mapping[str, Status]) -> float``: the live ``Verifier``
calls it, and every ``RolloutTrace`` carries the same object, so the credit
functions evaluate ``F`` on counterfactual statuses (docs/vict.md §4.4) without the
environment and a traced batch pickles in a few bytes per atom.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from agentcredit.verifier.atoms import Atom, AtomSpec, Status


@dataclass(frozen=True)
class ConjunctiveAggregator:
    """``F = 1`` when every hard atom is SAT and no penalty atom is VIOL, else ``0``.

    Attributes:
        hard: the ids of the hard atoms.
        penalty: the ids of the penalty atoms.
    """

    hard: tuple[str, ...]
    penalty: tuple[str, ...]

    @classmethod
    def from_atoms(cls, atoms: Iterable[Atom | AtomSpec]) -> ConjunctiveAggregator:
        """The aggregator of ``atoms``, read off their ``score_role``."""
        atoms = tuple(atoms)
        return cls(hard=tuple(a.atom_id for a in atoms if a.score_role == "hard"),
                   penalty=tuple(a.atom_id for a in atoms if a.score_role == "penalty"))

    def __call__(self, statuses: Mapping[str, Status]) -> float:
        hard_ok = all(statuses[j] is Status.SAT for j in self.hard)
        clean = all(statuses[j] is not Status.VIOL for j in self.penalty)
        return float(hard_ok and clean)
