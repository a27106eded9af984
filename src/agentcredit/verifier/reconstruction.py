"""How well a verifier reconstructs the environment's own check (docs/vict.md §4.2): the
conformance of ``F`` with ``V``.

A trajectory is replayed as its observations and snapshots; evidence is
cumulative (what the observations revealed so far). Reconstruction compares
``F_x`` on the terminal atom statuses with ``V_x`` on the terminal state; the
mutation harness applies each of the verifier's terminal-state mutations and
compares again. (The conformance suites of what plugs in, estimators and
environments, are ``agentcredit.testing``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentcredit.verifier.atoms import State, Verifier


def evidence_timeline(verifier: Verifier, observations: Sequence[str],
                      states: Sequence[State]) -> list[dict[str, Any]]:
    """Cumulative evidence after each observation: ``[E_0, E_1, ...]``, ``E_t ⊇ E_{t-1}``.

    ``observations[t]`` and ``states[t]`` are what the agent saw and the snapshot
    after step ``t`` (index 0 = after reset); both sequences have the same length.
    """
    if len(observations) != len(states):
        raise ValueError(f"{len(observations)} observations but {len(states)} states; "
                         "pass one snapshot per observation")
    timeline, evidence = [], {}
    for text, state in zip(observations, states, strict=True):
        evidence = {**evidence, **verifier.extract_evidence(text, state)}
        timeline.append(evidence)
    return timeline


def reconstruction_error(verifier: Verifier, state: State, evidence: State) -> float:
    """``|F_x(z̄) − V_x(state)|`` on one terminal state."""
    return abs(verifier.score(state, evidence) - verifier.original(state))


@dataclass(frozen=True)
class MutationOutcome:
    """One mutant of a terminal state: the verifier's and the environment's scores."""

    name: str
    f_score: float
    v_score: float

    @property
    def agrees(self) -> bool:
        return self.f_score == self.v_score


def mutation_outcomes(verifier: Verifier, state: State, evidence: State) -> list[MutationOutcome]:
    """Apply every mutation of ``verifier`` to a terminal state and score the mutant both ways."""
    outcomes = []
    for name, mutate in verifier.mutations.items():
        mutant_state, mutant_evidence = mutate(state, evidence)
        outcomes.append(MutationOutcome(name, verifier.score(mutant_state, mutant_evidence),
                                        verifier.original(mutant_state)))
    return outcomes
