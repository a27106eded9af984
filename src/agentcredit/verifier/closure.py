"""Deterministic dependency closure ``cl_D`` over a verifier's atoms (docs/vict.md §4.1).

An atom's ``dependencies`` are its parents. Counterfactually **setting atoms
SAT** pulls in every ancestor (the fix relies on them, whether or not they are
SAT already); **setting atoms UNSAT** pulls in every descendant that is SAT
(a fact that required a now-false parent falls with it). Both closures are
transitive.

[choice] "Deterministic" is read structurally: our atoms only have
conjunctive (AND) dependencies, so a closure is ambiguous only when the
dependency graph has a cycle (then which atom is the prerequisite is not
defined). Atoms on a cycle, and every atom connected to a cycle through
dependencies in either direction, are ``excluded``: they are never credit
candidates, and no closure of a non-excluded atom reaches them.

Sets are represented as bit masks over the atoms' fixed order (bit ``j`` =
``atoms[j]``): the greedy core (``credit/vict/core.py``) evaluates many
closures per rollout and masks keep that cheap. ``close_sat_ids`` /
``close_unsat_ids`` are the same operations on atom ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agentcredit.verifier.atoms import Atom, Status


def mask_of(indices: Iterable[int]) -> int:
    """The bit mask with the bits ``indices`` set."""
    mask = 0
    for j in indices:
        mask |= 1 << j
    return mask


def indices_of(mask: int) -> list[int]:
    """The set bits of ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


@dataclass(frozen=True)
class DependencyGraph:
    """The dependency DAG of one verifier's atoms, with precomputed transitive closures.

    Attributes:
        atom_ids: the atoms' ids in the verifier's order (bit ``j`` = ``atom_ids[j]``).
        ancestors: ``ancestors[j]`` = mask of every transitive parent of atom ``j``.
        descendants: ``descendants[j]`` = mask of every atom that transitively depends on ``j``.
        excluded: mask of atoms whose closure is not deterministic (connected to a cycle).
    """

    atom_ids: tuple[str, ...]
    ancestors: tuple[int, ...]
    descendants: tuple[int, ...]
    excluded: int

    @classmethod
    def from_atoms(cls, atoms: Sequence[Atom]) -> DependencyGraph:
        """Build the graph of ``atoms`` (ids unique, dependencies among them)."""
        ids = tuple(a.atom_id for a in atoms)
        index = {atom_id: j for j, atom_id in enumerate(ids)}
        unknown = sorted({d for a in atoms for d in a.dependencies} - set(index))
        if unknown:
            raise ValueError(f"atoms depend on unknown atoms {unknown}; known atoms: {list(ids)}")
        parents = [mask_of(index[d] for d in a.dependencies) for a in atoms]
        ancestors = [_reach(j, parents) for j in range(len(ids))]
        descendants = [mask_of(k for k in range(len(ids)) if ancestors[k] >> j & 1)
                       for j in range(len(ids))]
        cyclic = mask_of(j for j in range(len(ids)) if ancestors[j] >> j & 1)
        excluded = 0
        for j in range(len(ids)):
            if (ancestors[j] | descendants[j] | 1 << j) & cyclic:
                excluded |= 1 << j
        return cls(ids, tuple(ancestors), tuple(descendants), excluded)

    def index(self, atom_id: str) -> int:
        """The bit of ``atom_id``."""
        try:
            return self.atom_ids.index(atom_id)
        except ValueError:
            raise KeyError(f"no atom {atom_id!r}; atoms: {list(self.atom_ids)}") from None

    # CLOSURES ON MASKS

    def close_sat(self, mask: int) -> int:
        """``cl_D`` for atoms set SAT: ``mask`` plus every ancestor of its atoms."""
        out = mask
        for j in indices_of(mask):
            out |= self.ancestors[j]
        return out

    def close_unsat(self, mask: int, sat: int) -> int:
        """``cl_D`` for atoms set UNSAT: ``mask`` plus every descendant that is SAT (``sat``
        mask)."""
        down = 0
        for j in indices_of(mask):
            down |= self.descendants[j]
        return mask | (down & sat)

    # CLOSURES ON IDS

    def close_sat_ids(self, atom_ids: Iterable[str]) -> frozenset[str]:
        """``cl_D(S)`` when the atoms ``S`` are set SAT (ancestors added)."""
        mask = self.close_sat(mask_of(self.index(a) for a in atom_ids))
        return frozenset(self.atom_ids[j] for j in indices_of(mask))

    def close_unsat_ids(self, atom_ids: Iterable[str],
                        statuses: Mapping[str, Status]) -> frozenset[str]:
        """``cl_D(S)`` when the atoms ``S`` are set UNSAT (SAT descendants under ``statuses``
        added)."""
        sat = mask_of(j for j, a in enumerate(self.atom_ids) if statuses[a] is Status.SAT)
        mask = self.close_unsat(mask_of(self.index(a) for a in atom_ids), sat)
        return frozenset(self.atom_ids[j] for j in indices_of(mask))

    def excluded_ids(self) -> frozenset[str]:
        """Ids of the atoms excluded from credit (non-deterministic closure)."""
        return frozenset(self.atom_ids[j] for j in indices_of(self.excluded))


def _reach(start: int, parents: Sequence[int]) -> int:
    """Mask of every atom reachable from ``start`` by following parent links (``start`` only
    when it lies on a cycle)."""
    seen, frontier = 0, parents[start]
    while frontier:
        seen |= frontier
        nxt = 0
        for j in indices_of(frontier):
            nxt |= parents[j]
        frontier = nxt & ~seen
    return seen
