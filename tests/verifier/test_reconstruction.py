import pytest

from agentcredit.verifier.atoms import Atom, Status, Verifier
from agentcredit.verifier.reconstruction import (
    evidence_timeline,
    mutation_outcomes,
    reconstruction_error,
)

DONE = Atom("done", lambda s, e: Status.SAT if s.get("done") else Status.UNSAT, "online", (),
            ("done",), "hard")


def _verifier(original):
    return Verifier("t", (DONE,), aggregate=lambda z: float(z["done"] is Status.SAT),
                    original=original, is_commit=lambda a: False, commit_scope=lambda a: (),
                    extract_evidence=lambda text, state: {f"seen:{w}": True for w in text.split()},
                    mutations={"undo": lambda s, e: ({**s, "done": False}, e)})


def test_evidence_accumulates_over_the_trajectory():
    timeline = evidence_timeline(_verifier(lambda s: 0.0), ["a b", "c", ""], [{}, {}, {}])
    assert [sorted(e) for e in timeline] == [["seen:a", "seen:b"], ["seen:a", "seen:b", "seen:c"],
                                             ["seen:a", "seen:b", "seen:c"]]
    with pytest.raises(ValueError, match="2 observations but 1 states"):
        evidence_timeline(_verifier(lambda s: 0.0), ["a", "b"], [{}])


def test_reconstruction_error_detects_a_verifier_that_disagrees():
    honest = _verifier(lambda s: float(bool(s.get("done"))))
    liar = _verifier(lambda s: 1.0)
    assert reconstruction_error(honest, {"done": True}, {}) == 0.0
    assert reconstruction_error(liar, {"done": False}, {}) == 1.0


def test_mutation_outcomes_score_each_mutant_both_ways():
    honest = _verifier(lambda s: float(bool(s.get("done"))))
    [outcome] = mutation_outcomes(honest, {"done": True}, {})
    assert outcome.name == "undo" and outcome.agrees and outcome.f_score == 0.0
    [stale] = mutation_outcomes(_verifier(lambda s: 1.0), {"done": True}, {})
    assert not stale.agrees
