import pytest

from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, AtomSpec, Status, Verifier
from agentcredit.verifier.trace import guarded, trace_rollout


def _has(var):
    return lambda s, e: Status.SAT if s.get(var) or e.get(var) else Status.UNSAT


def _kitchen(original=None, extra_atoms=()):
    """A hand-made heat task: see the egg, hold it, heat it, place it; placing it cold violates.

    As in the ALFWorld verifier, ``held`` means "held at some point" and reads that lasting
    evidence, so it stays SAT after the egg is put down, placing keeps a valid proof record,
    and the put-down writes nothing to it.
    """
    atoms = (
        Atom("seen", _has("seen:egg"), "on_evidence", (), ("seen:egg",), "prerequisite"),
        Atom("held", _has("held:egg"), "online", ("seen",), ("held:egg",), "prerequisite"),
        Atom("hot", _has("ishot(egg)"), "online", ("held",), ("ishot(egg)",), "hard"),
        Atom("cold_placed",
             lambda s, e: Status.VIOL if s.get("in(egg, table)") and not s.get("ishot(egg)")
             else Status.UNSAT, "online", ("held",), ("in(egg, table)",), "penalty"),
        Atom("placed", _has("in(egg, table)"), "online", ("held", "hot"), ("in(egg, table)",),
             "hard"),
    ) + tuple(extra_atoms)
    return Verifier(
        "kitchen", atoms, ConjunctiveAggregator.from_atoms(atoms),
        original or (lambda s: float(bool(s.get("in(egg, table)") and s.get("ishot(egg)")))),
        is_commit=lambda a: a.startswith("place"),
        commit_scope=lambda a: ("placed", "cold_placed") if a.startswith("place") else (),
        extract_evidence=_evidence,
        mutations={"cool": lambda s, e: ({k: v for k, v in s.items() if k != "ishot(egg)"}, e)},
        env="test")


def _evidence(text, state):
    found = {"seen:egg": True} if "egg" in text.split() else {}
    return found | ({"held:egg": True} if state.get("holds(egg)") else {})


def _play(steps):
    """``steps`` = [(action, observation, facts added, facts removed)] from an empty state."""
    observations, snapshots, actions, state = ["a kitchen"], [{}], [], {}
    for action, text, add, remove in steps:
        state = {k: v for k, v in state.items() if k not in remove} | dict.fromkeys(add, True)
        actions.append(action)
        observations.append(text)
        snapshots.append(state)
    return observations, snapshots, actions


SOLVED = [("look", "you see an egg", [], []),
          ("take egg", "taken", ["holds(egg)"], []),
          ("heat egg", "hot now", ["ishot(egg)"], []),
          ("place egg", "placed", ["in(egg, table)"], ["holds(egg)"])]
COLD = [SOLVED[0], SOLVED[1], SOLVED[3], ("look", "you see an egg", [], [])]


def _edges(trace):
    return {(e.step, e.atom_id, e.relation) for e in trace.edges if e.valid}


def test_trace_records_statuses_after_every_step_from_the_reset_on():
    trace = trace_rollout(_kitchen(), *_play(SOLVED))
    assert trace.num_steps == 4 and len(trace.statuses) == 5
    held = [row[trace.atom_ids.index("held")] for row in trace.statuses]
    assert held == [Status.UNSAT, Status.UNSAT, Status.SAT, Status.SAT, Status.SAT]
    assert trace.f_score == trace.v_score == 1.0 and trace.conformance_error == 0.0
    assert trace.delta == (1.0, 1.0, 1.0, 0.0, 1.0)


def test_each_step_is_linked_to_the_atoms_it_wrote_committed_violated_or_revealed():
    trace = trace_rollout(_kitchen(), *_play(SOLVED))
    assert _edges(trace) == {
        (0, "seen", "reveal"), (1, "held", "reveal"), (2, "hot", "write"),
        (3, "placed", "write"), (3, "placed", "commit"),
        (3, "cold_placed", "write"), (3, "cold_placed", "commit")}
    assert trace.revealed[1] == {"seen:egg"} and trace.revealed[2] == {"held:egg"}
    assert trace.evidence[-1] == {"seen:egg": True, "held:egg": True}
    cold = trace_rollout(_kitchen(), *_play(COLD))
    assert (2, "cold_placed", "violation") in _edges(cold)


def test_an_edge_whose_parents_are_not_sat_fails_the_proof_record_check():
    cold = trace_rollout(_kitchen(), *_play(COLD))
    placed = [e for e in cold.edges if e.atom_id == "placed" and e.step == 2]
    assert placed and all(not e.valid and e.unmet_parents == ("hot",) for e in placed)
    assert all(e.valid for e in cold.edges if e.atom_id == "cold_placed")


def test_reveal_edges_of_one_atom_share_a_total_weight_of_one():
    steps = [("look", "an egg", [], []), ("look", "nothing", [], []),
             ("look", "an egg again", [], [])]
    trace = trace_rollout(_kitchen(), *_play(steps))
    # the third look re-shows what the first revealed: no new evidence, no edge
    assert [(e.step, e.weight) for e in trace.edges if e.relation == "reveal"] == [(0, 1.0)]

    def two_eggs(text, state):
        return {f"seen:{w}": True for w in text.split() if w.startswith("egg")}

    verifier = _kitchen()
    seen = Atom("seen", lambda s, e: Status.SAT if e else Status.UNSAT, "on_evidence", (),
                ("seen:egg1", "seen:egg2"), "prerequisite")
    verifier = Verifier("k", (seen,) + verifier.atoms[1:], verifier.aggregate, verifier.original,
                        verifier.is_commit, verifier.commit_scope, two_eggs)
    trace = trace_rollout(verifier, *_play([("look", "egg1", [], []), ("look", "egg2", [], [])]))
    assert [(e.step, e.weight) for e in trace.edges if e.relation == "reveal"] == [(0, 0.5),
                                                                                 (1, 0.5)]


def test_terminal_only_and_on_commit_atoms_are_unknown_until_they_can_be_evaluated():
    logged = Atom("logged", _has("log"), "terminal_only", (), ("log",), "prerequisite")
    receipt = Atom("receipt", _has("receipt"), "on_commit", (), ("receipt",), "prerequisite")
    verifier = _kitchen(extra_atoms=(logged, receipt))
    verifier = Verifier("k", verifier.atoms, verifier.aggregate, verifier.original,
                        verifier.is_commit, lambda a: ("receipt",) if a.startswith("place") else (),
                        verifier.extract_evidence)
    steps = [("write log", "", ["log", "receipt"], []), ("place egg", "", [], []),
             ("wait", "", [], [])]
    trace = trace_rollout(verifier, *_play(steps))
    j_log, j_receipt = trace.atom_ids.index("logged"), trace.atom_ids.index("receipt")
    assert [row[j_log] for row in trace.statuses] == [Status.UNK] * 3 + [Status.SAT]
    assert [row[j_receipt] for row in trace.statuses] == [Status.UNK] * 2 + [Status.SAT] * 2
    refused = trace_rollout(verifier, *_play(steps), valid=[True, False, True])
    assert refused.statuses[-1][j_receipt] is Status.UNK
    assert not any(e.relation == "commit" for e in refused.edges)


def test_conformance_compares_f_with_v_on_the_rollout_and_its_mutants():
    trace = trace_rollout(_kitchen(), *_play(SOLVED))
    [mutant] = trace.mutations
    assert mutant.name == "cool" and mutant.f_score == mutant.v_score == 0.0
    liar = trace_rollout(_kitchen(original=lambda s: 1.0), *_play(SOLVED))
    assert liar.reconstruction_error == 0.0 and liar.conformance_error == 1.0


def test_steps_mention_the_atoms_whose_entities_they_name_or_whose_facts_they_change():
    trace = trace_rollout(_kitchen(), *_play(SOLVED))
    assert "held" in trace.mentions[1] and "placed" in trace.mentions[3]
    assert trace.mentions[0] == frozenset()


def test_a_trace_keeps_the_verifiers_f_and_atom_specs_but_no_predicate():
    verifier = _kitchen()
    trace = trace_rollout(verifier, *_play(SOLVED))
    assert trace.verifier_id == "test:kitchen"
    assert trace.aggregate is verifier.aggregate
    assert trace.aggregate == ConjunctiveAggregator(hard=("hot", "placed"),
                                                    penalty=("cold_placed",))
    assert all(type(a) is AtomSpec for a in trace.atoms)
    assert trace.atom("placed") == AtomSpec("placed", "online", ("held", "hot"), "hard", 1.0)
    assert trace.aggregate(trace.terminal) == trace.f_score == 1.0


def test_trace_rejects_misaligned_recordings_with_what_to_pass():
    observations, snapshots, actions = _play(SOLVED)
    with pytest.raises(ValueError, match="T\\+1 observations and snapshots"):
        trace_rollout(_kitchen(), observations[1:], snapshots, actions)
    with pytest.raises(ValueError, match="3 validity flags for 4 actions"):
        trace_rollout(_kitchen(), observations, snapshots, actions, valid=[True] * 3)


def test_a_guarded_witness_key_counts_only_while_its_guard_holds():
    """``size`` is bound to item ``b``: choosing a size on item ``a`` writes nothing to it."""
    atom = Atom("size_ok", lambda s, e: Status.SAT if s.get("size") == "L" else Status.UNSAT,
                "online", (), ("item", "size"), "hard",
                binds=lambda s, e: (guarded("size", "item", s.get("item")),
                                    guarded("item", "item", s.get("item"))))
    verifier = Verifier(
        task_id="shop", atoms=(atom,), aggregate=ConjunctiveAggregator.from_atoms((atom,)),
        original=lambda s: float(s.get("size") == "L" and s.get("item") == "b"),
        is_commit=lambda a: False, commit_scope=lambda a: (),
        extract_evidence=lambda text, state: {}, mutations={}, env="synthetic")
    snapshots = [{}, {"item": "a"}, {"item": "a", "size": "L"}, {"item": "b"},
                 {"item": "b", "size": "L"}]
    trace = trace_rollout(verifier, ["o"] * 5, snapshots,
                          ["open a", "pick L", "open b", "pick L"])
    # steps 0-1 act on item a; step 2 opens b (item and size change while b is open)
    assert {(e.step, e.relation) for e in trace.edges} == {(2, "write"), (3, "write")}


# SUPPORT EDGES AND SETTLED WRITES (docs/vict.md §4.3)

def _stove():
    """``hot`` (reads ``ishot``) and ``placed`` (reads ``in``, committed by ``place egg``), no
    dependencies, ``F`` = both; ``seen`` evidence is on ``placed``'s path."""
    atoms = (Atom("hot", _has("ishot"), "online", (), ("ishot",), "hard"),
             Atom("placed", _has("in"), "online", (), ("in", "seen:egg"), "hard"))
    return Verifier("stove", atoms, ConjunctiveAggregator.from_atoms(atoms),
                    lambda s: float(bool(s.get("ishot") and s.get("in"))),
                    is_commit=lambda a: a == "place egg",
                    commit_scope=lambda a: ("placed",) if a == "place egg" else (),
                    extract_evidence=_evidence)


# (action, observation, facts added, facts removed, admissible after the step)
WALK = [("go to stove", "a stove", [], [], {"heat egg", "go to table", "look"}),
        ("look", "an egg spot", [], [], {"heat egg", "go to table", "look"}),
        ("heat egg", "hot", ["ishot"], [], {"go to table", "look"}),
        ("go to table", "a table", [], [], {"place egg", "go to stove", "look"}),
        ("go to stove", "a stove", [], [], {"go to table", "look"}),
        ("go to table", "a table", [], [], {"place egg", "go to stove", "look"}),
        ("place egg", "placed", ["in"], [], {"take egg", "look"}),
        ("take egg", "taken", [], ["in"], {"place egg", "look"})]
START = {"go to stove", "go to table", "look"}


def _walk(steps):
    observations, snapshots, actions = _play([s[:4] for s in steps])
    return observations, snapshots, actions, [START] + [s[4] for s in steps]


def _relations(trace, *relations):
    return [(e.step, e.atom_id, e.relation, e.weight) for e in trace.edges
            if e.relation in relations]


def test_support_is_the_last_step_that_made_a_witness_action_admissible():
    observations, snapshots, actions, admissible = _walk(WALK[:7])
    trace = trace_rollout(_stove(), observations, snapshots, actions, admissible=admissible)
    # the heat became admissible at the first walk to the stove (the look changed nothing);
    # the place at the second walk to the table, not the first (the stove walk undid it)
    assert _relations(trace, "support") == [(0, "hot", "support", 1.0),
                                        (5, "placed", "support", 0.5)]
    # "egg" named by the observation of step 1 reveals evidence on placed's path: the reveal
    # and the support share the evidence-path weight 1.0
    assert _relations(trace, "reveal") == [(1, "placed", "reveal", 0.5)]
    plain = trace_rollout(_stove(), observations, snapshots, actions)  # no admissible sets
    assert _relations(plain, "support") == [] and _relations(plain, "reveal") == [
        (1, "placed", "reveal", 1.0)]


def test_support_never_reaches_behind_the_atoms_previous_witness():
    observations, snapshots, actions, admissible = _walk(WALK)
    trace = trace_rollout(_stove(), observations, snapshots, actions, admissible=admissible)
    # the place (step 6) made "take egg" admissible, but it is placed's previous witness; the
    # walk (step 5) supported the place, which the take undid, so it supports nothing
    assert [e for e in _relations(trace, "support") if e[1] == "placed"] == []


def test_an_atom_that_ends_unsat_keeps_only_the_steps_that_left_it_unsat():
    observations, snapshots, actions, admissible = _walk(WALK)
    trace = trace_rollout(_stove(), observations, snapshots, actions, admissible=admissible)
    assert trace.terminal["placed"] is Status.UNSAT
    # the place (write + commit) was undone by the take: only the take is placed's witness
    # there (the reveal on its path stays)
    assert [(s, r) for s, j, r, _ in _relations(trace, "write", "commit") if j == "placed"] == [
        (7, "write")]
    won = trace_rollout(_stove(), *_walk(WALK[:7])[:3], admissible=_walk(WALK[:7])[3])
    assert [(s, r) for s, j, r, _ in _relations(won, "write", "commit") if j == "placed"] == [
        (6, "write"), (6, "commit")]


def test_the_take_back_carries_the_blame_of_the_placement_it_undid():
    """Group of two, GRPO: ``won`` (WALK without the take back, reward 1) and ``undone`` (reward
    0). ``placed``: δ = (1, 0), mean 0.5, std 0.5, so δ̂ = ∓0.5/(0.5 + ε) for the loser; its
    core (q = −1) is {placed}; its only write or commit is the take (step 7), weight 1, and
    its evidence path is the reveal at 1, weight 1: Z = 2."""
    import torch

    from agentcredit.credit import CreditBatch
    from agentcredit.credit.vict import VICTConfig, compute_credit

    traces = [trace_rollout(_stove(), *_walk(steps)[:3], admissible=_walk(steps)[3])
              for steps in (WALK[:7], WALK)]
    batch = CreditBatch.from_lists([[0.0] * 6 + [1.0], [0.0] * 8], [0, 0], traces=traces,
                                   dtype=torch.float64)
    computation = compute_credit(batch, VICTConfig())
    d = 0.5 / (0.5 + 1e-6)
    undone = computation.vict[batch.step_rollout == 1].tolist()
    assert undone == pytest.approx([0, -d / 2, 0, 0, 0, 0, 0, -d / 2])
