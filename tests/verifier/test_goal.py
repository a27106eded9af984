"""Level-0 atoms from a declared goal state: equality, existence and non-modification atoms
with predicates, state variables (so write witnesses), user dependencies, level 0, and a
conjunction for F."""

from __future__ import annotations

import pytest

from agentcredit.verifier.atoms import Status
from agentcredit.verifier.goal import Goal, goal_atoms, goal_verifier
from agentcredit.verifier.trace import trace_rollout

#: a two-record shop: the order must become "cancelled", a refund record must exist, and no
#: other record may change (the user record, the other order)
INITIAL = {"db:orders/1": "pending", "db:orders/2": "pending", "db:users/ann": "ann"}
GOAL = Goal(equal={"db:orders/1": "cancelled"}, exist=("db:refunds/1",),
            unchanged=("db:",), depends={"exist:db:refunds/1": ("equal:db:orders/1",)})


def statuses(state: dict) -> dict[str, Status]:
    return {a.atom_id: a.predicate(state, {}) for a in goal_atoms(GOAL, INITIAL)}


def test_each_declared_fact_is_one_level_0_atom_with_its_variable_and_dependencies():
    atoms = {a.atom_id: a for a in goal_atoms(GOAL, INITIAL)}
    assert list(atoms) == ["equal:db:orders/1", "exist:db:refunds/1", "unchanged:db:"]
    assert {a.level for a in atoms.values()} == {0}
    assert atoms["equal:db:orders/1"].state_vars == ("db:orders/1",)
    assert atoms["equal:db:orders/1"].score_role == "hard"
    assert atoms["exist:db:refunds/1"].dependencies == ("equal:db:orders/1",)
    assert atoms["unchanged:db:"].score_role == "penalty"


def test_statuses_on_the_start_the_goal_and_a_forbidden_write():
    assert statuses(INITIAL) == {"equal:db:orders/1": Status.UNSAT,
                                 "exist:db:refunds/1": Status.UNSAT,
                                 "unchanged:db:": Status.SAT}
    done = {**INITIAL, "db:orders/1": "cancelled", "db:refunds/1": {"amount": 5}}
    assert set(statuses(done).values()) == {Status.SAT}
    # cancelling the wrong order: a record outside the goal changed
    wrong = {**done, "db:orders/2": "cancelled"}
    assert statuses(wrong)["unchanged:db:"] is Status.VIOL
    # deleting a record the goal does not name is a change too
    deleted = {k: v for k, v in done.items() if k != "db:users/ann"}
    assert statuses(deleted)["unchanged:db:"] is Status.VIOL


def test_the_penalty_binds_exactly_the_records_that_changed():
    penalty = goal_atoms(GOAL, INITIAL)[-1]
    state = {**INITIAL, "db:orders/1": "cancelled", "db:orders/2": "x", "db:new/9": 1,
             "told:hello": True}
    assert penalty.binds(state, {}) == ("db:new/9", "db:orders/2")


def test_f_is_the_conjunction_and_v_defaults_to_it():
    verifier = goal_verifier("shop", GOAL, INITIAL)
    done = {**INITIAL, "db:orders/1": "cancelled", "db:refunds/1": 1}
    assert verifier.score(done, {}) == verifier.original(done) == 1.0
    assert verifier.score({**done, "db:orders/2": "x"}, {}) == 0.0
    assert verifier.score(INITIAL, {}) == verifier.original(INITIAL) == 0.0


def test_the_step_that_writes_a_goal_record_gets_its_write_witness():
    verifier = goal_verifier("shop", GOAL, INITIAL)
    cancelled = {**INITIAL, "db:orders/1": "cancelled"}
    refunded = {**cancelled, "db:refunds/1": 1}
    trace = trace_rollout(verifier, ["start", "cancelled", "refunded"],
                          [INITIAL, cancelled, refunded], ["cancel 1", "refund 1"])
    writes = {(e.step, e.atom_id) for e in trace.edges if e.relation == "write" and e.valid}
    assert writes == {(0, "equal:db:orders/1"), (1, "exist:db:refunds/1")}


def test_a_dependency_on_an_atom_the_goal_does_not_make_is_refused():
    with pytest.raises(ValueError, match=r"names atoms the goal does not make: \['exist:x'\]"):
        goal_atoms(Goal(equal={"a": 1}, depends={"exist:x": ("equal:a",)}), {})
