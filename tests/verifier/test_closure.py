import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcredit.verifier.atoms import Atom, Status
from agentcredit.verifier.closure import DependencyGraph, indices_of, mask_of


def _atom(atom_id, deps=()):
    return Atom(atom_id, lambda s, e: Status.UNSAT, "online", tuple(deps), (atom_id,), "hard")


# The heat task's dependency structure (envs/alfworld/verifier.py).
HEAT = DependencyGraph.from_atoms([
    _atom("target_seen"), _atom("receptacle_found"), _atom("object_held", ["target_seen"]),
    _atom("transformation", ["object_held"]), _atom("premature_placement", ["object_held"]),
    _atom("final_placement", ["object_held", "receptacle_found", "transformation"]),
    _atom("wrong_object_placed"),
])


def test_setting_an_atom_sat_pulls_in_every_ancestor_transitively():
    assert HEAT.close_sat_ids(["final_placement"]) == {
        "final_placement", "object_held", "receptacle_found", "transformation", "target_seen"}
    assert HEAT.close_sat_ids(["wrong_object_placed"]) == {"wrong_object_placed"}


def test_setting_an_atom_unsat_pulls_in_only_its_sat_descendants():
    statuses = dict.fromkeys(HEAT.atom_ids, Status.SAT) | {
        "transformation": Status.UNSAT, "premature_placement": Status.VIOL}
    # final_placement depends on object_held through transformation too; it is SAT, so it falls.
    assert HEAT.close_unsat_ids(["object_held"], statuses) == {"object_held", "final_placement"}
    assert HEAT.close_unsat_ids(["target_seen"], statuses) == {
        "target_seen", "object_held", "final_placement"}


def test_atoms_connected_to_a_dependency_cycle_are_excluded_from_credit():
    graph = DependencyGraph.from_atoms([
        _atom("a", ["b"]), _atom("b", ["a"]), _atom("c", ["a"]), _atom("d"), _atom("e", ["d"])])
    assert graph.excluded_ids() == {"a", "b", "c"}
    assert HEAT.excluded_ids() == frozenset()
    with pytest.raises(ValueError, match=r"unknown atoms \['ghost'\]"):
        DependencyGraph.from_atoms([_atom("a", ["ghost"])])


@st.composite
def _dags(draw):
    n = draw(st.integers(1, 8))
    atoms = [_atom(f"a{j}", [f"a{k}" for k in range(j) if draw(st.booleans())]) for j in range(n)]
    return DependencyGraph.from_atoms(atoms), draw(st.integers(0, 2 ** n - 1)), draw(
        st.integers(0, 2 ** n - 1))


@settings(max_examples=60, deadline=None)
@given(_dags())
def test_closures_are_idempotent_monotone_and_keep_their_seed(case):
    graph, seed, sat = case
    up = graph.close_sat(seed)
    down = graph.close_unsat(seed, sat)
    assert up & seed == seed and down & seed == seed
    assert graph.close_sat(up) == up and graph.close_unsat(down, sat) == down
    for j in indices_of(up):
        assert graph.ancestors[j] & ~up == 0  # closed under "parent of"
    for j in indices_of(down):
        assert graph.descendants[j] & sat & ~down == 0  # closed under "SAT child of"
    assert mask_of(indices_of(seed)) == seed
