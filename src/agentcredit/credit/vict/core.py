"""Core attribution: base direction, preference magnitude and the budgeted greedy core
(docs/vict.md §4.4).

Symbols → variables:
    ``q_i`` → ``direction``: ``sign(A^base_i)`` with tie margin ``ε_q`` (0 → abstain, ``tie``).
    ``ρ_i`` → ``magnitude``: ``0.5 · |R_i − μ|`` in verifier-score units.
    ``Δ(C)`` → ``CoreSearch.gain``: ``q = +1``: ``F(z̄) − F(z̄[cl(C) → UNSAT])``;
    ``q = −1``: ``F(z̄[cl(C) → SAT]) − F(z̄)``.
    ``C*_i`` → ``CoreSearch.core``: a bit mask over the trace's atoms; ``CoreSearch.picked``
    the atoms the search itself chose, ``core & ~picked`` the atoms their closure added.

[choice] ``R_i`` in score units is the rollout's original verifier score
``V_x(τ_i)`` (the trace's ``v_score``), ``μ`` its group mean. docs/vict.md §4.4 writes
``0.5·|R_i − μ|``; with ALFWorld's outcome reward ``10·1[won]`` that is 5 score
units for a success while ``Δ ≤ 1``, so every core would hit the budget. ``V``
is the reward in the verifier's own units (and equals ``F`` on a conforming
task); the invalid-action penalties in ``R_i`` are not verifier facts and no
core can explain them, so they set the direction only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from agentcredit.verifier.atoms import Status
from agentcredit.verifier.closure import DependencyGraph, indices_of

_TOL = 1e-12  # Δ ≥ ρ is tested with this slack against rounding in ρ


@dataclass(frozen=True)
class CoreSearch:
    """The outcome of the greedy core search for one rollout.

    Attributes:
        core: bit mask of ``C*_i``, closure atoms included (0 when none is needed or found).
        picked: bit mask of the atoms the greedy search chose (every atom tied at a step's
            maximum); ``core & ~picked`` are the atoms only the closure pulled in
            (docs/vict.md §4.9 reports the two apart).
        reached: ``Δ(core) ≥ ρ_i``; False means the rollout abstains with reason ``budget``.
        additions: greedy additions made (≤ ``B``).
        gain: ``Δ(core)``.
    """

    core: int
    picked: int
    reached: bool
    additions: int
    gain: float


def base_direction(rollout_base: Sequence[float], eps_q: float) -> list[int]:
    """``q_i = sign(A^base_i)``, 0 when ``|A^base_i| ≤ ε_q`` (docs/vict.md §4.4)."""
    return [1 if a > eps_q else -1 if a < -eps_q else 0 for a in rollout_base]


def preference_magnitude(scores: Sequence[float], groups: Sequence[int]) -> list[float]:
    """``ρ_i = 0.5 · |V_i − mean_{k ∈ g(i)} V_k|`` for verifier scores ``V`` (module doc)."""
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for v, g in zip(scores, groups, strict=True):
        sums[g] = sums.get(g, 0.0) + v
        counts[g] = counts.get(g, 0) + 1
    return [0.5 * abs(v - sums[g] / counts[g]) for v, g in zip(scores, groups, strict=True)]


def greedy_core(statuses: Sequence[Status], direction: int, magnitude: float,
                graph: DependencyGraph, roles: Sequence[str],
                aggregate: Callable[[Mapping[str, Status]], float], budget: int) -> CoreSearch:
    """The budgeted greedy core ``C*_i`` of docs/vict.md §4.4 for one rollout with ``q_i ≠ 0``.

    ``C ← ∅``; up to ``budget`` times find the maximum of ``Δ(cl(C ∪ {j}))`` over the
    candidates ``j ∉ C`` and set ``C ← cl(C ∪ T)``, ``T`` every candidate tied at that
    maximum (within 1e-12), stopping as soon as ``Δ(C) ≥ ρ``. [choice] (docs/vict.md §4.4)
    taking all tied atoms makes the core independent of the atoms' declaration order: under
    a 0/1 aggregator every SAT hard atom of a success is decisive on its own, and all enter.
    Candidates: ``q = +1``: SAT atoms; ``q = −1``: non-SAT atoms, a penalty atom only when VIOL.
    Atoms with a non-deterministic closure (``graph.excluded``) are never candidates.
    ``ρ ≤ 0`` (nothing to explain) returns the empty core, reached.

    Tested properties: the core is closed under ``cl``; ``Δ(core) ≥ ρ`` when reached; the
    picked atoms are in the core and are exactly the tied maxima added; a SAT prerequisite of
    a failed rollout's fix enters its core; permuting the verifier's atoms permutes the core
    and changes no credit.
    """
    if direction not in (1, -1):
        raise ValueError(f"greedy_core needs a direction of +1 or -1; got {direction!r} "
                         "(a tie abstains before the core search)")
    candidates, close, counterfactual = _search_space(statuses, direction, graph, roles,
                                                      aggregate)
    core, picked, gain = 0, 0, 0.0
    if gain >= magnitude - _TOL:
        return CoreSearch(core=0, picked=0, reached=True, additions=0, gain=0.0)
    cache: dict[int, float] = {}

    def gain_of(mask: int) -> float:
        if mask not in cache:
            cache[mask] = counterfactual(mask)
        return cache[mask]

    for addition in range(1, budget + 1):
        options = {j: close(core | 1 << j) for j in indices_of(candidates & ~core)}
        if not options:
            return CoreSearch(core=core, picked=picked, reached=False, additions=addition - 1,
                              gain=gain)
        best = max(gain_of(mask) for mask in options.values())
        tied = [j for j, mask in options.items() if gain_of(mask) >= best - _TOL]
        # every atom tied at the maximum enters with its closure: the core never depends on
        # the order in which the verifier declares its atoms
        picked |= sum(1 << j for j in tied)
        core = close(core | picked)
        gain = gain_of(core)
        if gain >= magnitude - _TOL:
            return CoreSearch(core=core, picked=picked, reached=True, additions=addition,
                              gain=gain)
    return CoreSearch(core=core, picked=picked, reached=False, additions=budget, gain=gain)


def _search_space(statuses: Sequence[Status], direction: int, graph: DependencyGraph,
                  roles: Sequence[str], aggregate: Callable[[Mapping[str, Status]], float]
                  ) -> tuple[int, Callable[[int], int], Callable[[int], float]]:
    """What the greedy search of direction ``q`` works with (docs/vict.md §4.4): the bit mask
    of candidate atoms, the closure ``cl`` of a mask and ``Δ`` of a mask.

    ``q = +1``: candidates are the SAT atoms, ``cl`` closes towards UNSAT and
    ``Δ(C) = F(z̄) − F(z̄[cl(C) → UNSAT])``. ``q = −1``: candidates are the non-SAT atoms (a
    penalty only when VIOL), ``cl`` closes towards SAT and ``Δ(C) = F(z̄[cl(C) → SAT]) − F(z̄)``,
    where "SAT" clears a penalty's violation. ``graph.excluded`` atoms are never candidates.
    """
    ids = graph.atom_ids
    current = dict(zip(ids, statuses, strict=True))
    score = aggregate(current)
    sat = sum(1 << j for j, z in enumerate(statuses) if z is Status.SAT)
    everyone = (1 << len(ids)) - 1
    if direction > 0:
        candidates = sat & ~graph.excluded

        def close(mask: int) -> int:
            return graph.close_unsat(mask, sat)

        def counterfactual(mask: int) -> float:
            changed = dict(current)
            for j in indices_of(mask & sat):
                changed[ids[j]] = Status.UNSAT
            return score - aggregate(changed)
    else:
        viol = sum(1 << j for j, z in enumerate(statuses) if z is Status.VIOL)
        penalty = sum(1 << j for j, r in enumerate(roles) if r == "penalty")
        candidates = (everyone & ~sat & ~graph.excluded) & ~(penalty & ~viol)

        def close(mask: int) -> int:
            return graph.close_sat(mask)

        def counterfactual(mask: int) -> float:
            changed = dict(current)
            for j in indices_of(mask & ~sat):
                if roles[j] != "penalty":
                    changed[ids[j]] = Status.SAT
                elif statuses[j] is Status.VIOL:
                    changed[ids[j]] = Status.UNSAT  # "set SAT" clears a violation
            return aggregate(changed) - score
    return candidates, close, counterfactual
