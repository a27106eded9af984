import random

import pytest

from agentcredit.credit.vict.core import (
    base_direction,
    greedy_core,
    preference_magnitude,
)
from agentcredit.verifier.atoms import Atom, Status
from agentcredit.verifier.closure import DependencyGraph, indices_of

S, U, V = Status.SAT, Status.UNSAT, Status.VIOL
# The heat task's atoms, roles and aggregator (envs/alfworld/verifier.py).
SPECS = [("target_seen", (), "prerequisite"), ("receptacle_found", (), "prerequisite"),
         ("object_held", ("target_seen",), "prerequisite"),
         ("transformation", ("object_held",), "hard"),
         ("premature_placement", ("object_held",), "penalty"),
         ("final_placement", ("object_held", "receptacle_found", "transformation"), "hard"),
         ("wrong_object_placed", (), "penalty")]
ATOMS = [Atom(i, lambda s, e: U, "online", d, (i,), r) for i, d, r in SPECS]
GRAPH = DependencyGraph.from_atoms(ATOMS)
ROLES = [r for _, _, r in SPECS]


def F(z):
    return float(z["transformation"] is S and z["final_placement"] is S
                 and V not in (z["premature_placement"], z["wrong_object_placed"]))


def _core(statuses, direction, magnitude, budget=8):
    search = greedy_core(statuses, direction, magnitude, GRAPH, ROLES, F, budget)
    return search, {GRAPH.atom_ids[j] for j in indices_of(search.core)}


def test_direction_is_the_sign_of_the_base_advantage_with_a_tie_margin():
    assert base_direction([1.0, -0.5, 1e-7, -1e-7, 0.0], 1e-6) == [1, -1, 0, 0, 0]


def test_magnitude_is_half_the_score_gap_to_the_group_mean():
    assert preference_magnitude([1.0, 0.0, 0.0, 0.0, 0.5, 0.5], [0, 0, 0, 0, 1, 1]) == [
        0.375, 0.125, 0.125, 0.125, 0.0, 0.0]


def test_success_core_takes_every_atom_whose_removal_alone_fails_the_task():
    success = (S, S, S, S, U, S, U)
    search, core = _core(success, +1, 0.375)
    # removing any SAT atom drops F from 1 to 0: all five tie at Δ = 1 and enter together
    assert core == {"target_seen", "receptacle_found", "object_held", "transformation",
                    "final_placement"}
    assert search.reached and search.gain == 1.0 and search.additions == 1
    # all five were picked by the search itself; the closure added none
    assert search.picked == search.core


@pytest.mark.parametrize("statuses,direction", [((S, S, S, S, U, S, U), +1),
                                                ((S, S, S, U, V, S, U), -1),
                                                ((S, U, S, U, U, U, U), -1),
                                                ((S, S, U, U, U, U, V), -1)])
def test_the_core_does_not_depend_on_the_order_the_atoms_are_declared_in(statuses, direction):
    reference = _core(statuses, direction, 0.25)[1]
    for seed in range(6):
        order = list(range(len(SPECS)))
        random.Random(seed).shuffle(order)
        atoms = [ATOMS[k] for k in order]
        graph = DependencyGraph.from_atoms(atoms)
        search = greedy_core([statuses[k] for k in order], direction, 0.25, graph,
                             [ROLES[k] for k in order], F, 8)
        assert {graph.atom_ids[j] for j in indices_of(search.core)} == reference


def test_a_failed_rollouts_core_includes_the_sat_prerequisite_its_fix_relies_on():
    premature = (S, S, S, U, V, S, U)
    search, core = _core(premature, -1, 0.0625)
    # fixing the flag alone or clearing the violation alone leaves F = 0: both tie at Δ = 0,
    # enter together, and their closure pulls in the held egg
    assert search.reached and search.additions == 1
    assert core == {"transformation", "premature_placement", "object_held", "target_seen"}


def test_the_core_tells_the_atoms_the_search_picked_from_those_its_closure_added():
    premature = (S, S, S, U, V, S, U)
    search, _ = _core(premature, -1, 0.0625)
    picked = {GRAPH.atom_ids[j] for j in indices_of(search.picked)}
    closure = {GRAPH.atom_ids[j] for j in indices_of(search.core & ~search.picked)}
    # the two tied candidates were picked; the SAT ancestors they rely on came with the closure
    assert picked == {"transformation", "premature_placement"}
    assert closure == {"object_held", "target_seen"}
    # a search cut short by the budget still reports what it picked
    search, _ = _core(premature, -1, 2.0, budget=1)
    assert {GRAPH.atom_ids[j] for j in indices_of(search.picked)} == {
        "transformation", "premature_placement"}


def test_penalty_atoms_are_candidates_only_when_violated_and_the_rollout_failed():
    never_violated = (S, S, S, U, U, U, U)
    _, core = _core(never_violated, -1, 0.1)
    assert "wrong_object_placed" not in core and "premature_placement" not in core
    _, core = _core((S, S, S, S, U, S, U), +1, 0.5)
    assert not core & {"premature_placement", "wrong_object_placed"}


def test_an_unreachable_magnitude_abstains_on_the_budget():
    premature = (S, S, S, U, V, S, U)
    search, _ = _core(premature, -1, 2.0, budget=1)
    assert not search.reached and search.additions == 1
    search, _ = _core(premature, -1, 2.0)  # Δ ≤ 1 < ρ: every candidate is tried, in vain
    assert not search.reached


def test_nothing_to_explain_gives_the_empty_core():
    search, core = _core((S, S, S, U, V, S, U), -1, 0.0)
    assert search.reached and core == set() and search.additions == 0


def test_atoms_with_a_non_deterministic_closure_never_enter_a_core():
    cyclic = [Atom("a", lambda s, e: U, "online", ("b",), ("a",), "hard"),
              Atom("b", lambda s, e: U, "online", ("a",), ("b",), "hard"),
              Atom("c", lambda s, e: U, "online", (), ("c",), "hard")]
    graph = DependencyGraph.from_atoms(cyclic)

    def all_hard(z):
        return float(all(v is S for v in z.values()))

    search = greedy_core((S, S, S), +1, 0.5, graph, ["hard"] * 3, all_hard, 8)
    assert search.reached and search.core == 0b100  # only c; a and b are excluded
    search = greedy_core((U, U, S), -1, 0.5, graph, ["hard"] * 3, all_hard, 8)
    assert not search.reached  # fixing the task needs a or b, which cannot be credited
