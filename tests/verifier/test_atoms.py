import pytest

from agentcredit.verifier.atoms import Atom, Status, Verifier


def _atom(atom_id, deps=(), role="hard", **kw):
    return Atom(atom_id, lambda s, e: Status.SAT if atom_id in s else Status.UNSAT, "online",
                deps, (atom_id,), role, **kw)


def _verifier(atoms):
    return Verifier("t", tuple(atoms), aggregate=lambda z: float(all(
        v is Status.SAT for v in z.values())), original=lambda s: 0.0, is_commit=lambda a: False,
        commit_scope=lambda a: (), extract_evidence=lambda text, state: {})


def test_atom_rejects_unknown_roles_and_timings_with_the_allowed_values():
    with pytest.raises(ValueError, match="score_role='bonus'"):
        _atom("a", role="bonus")
    with pytest.raises(ValueError, match="evaluable_when='later'"):
        Atom("a", lambda s, e: Status.SAT, "later", (), (), "hard")
    with pytest.raises(ValueError, match="graded atoms need a value"):
        _atom("a", role="graded")


def test_verifier_rejects_duplicate_ids_and_unknown_dependencies():
    with pytest.raises(ValueError, match="duplicate atom ids"):
        _verifier([_atom("a"), _atom("a")])
    with pytest.raises(ValueError, match=r"unknown atoms \['ghost'\]"):
        _verifier([_atom("a", deps=("ghost",))])


def test_statuses_and_score_read_the_state():
    verifier = _verifier([_atom("a"), _atom("b", deps=("a",))])
    assert verifier.statuses({"a": True}, {}) == {"a": Status.SAT, "b": Status.UNSAT}
    assert verifier.score({"a": True}, {}) == 0.0
    assert verifier.score({"a": True, "b": True}, {}) == 1.0
    with pytest.raises(KeyError, match="no atom 'c'"):
        verifier.atom("c")
