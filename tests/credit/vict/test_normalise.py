import pytest
import torch

from agentcredit.credit.vict.normalise import MAD_TO_STD, atom_marginals, robust_normalise
from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, Status, Verifier
from agentcredit.verifier.trace import trace_rollout


def test_median_centring_credits_only_the_rollouts_that_differ_from_the_majority():
    delta = torch.tensor([[1.0], [1.0], [1.0], [1.0], [1.0], [0.0], [0.0], [0.0]])  # 5 of 8 reached
    out = robust_normalise(delta, 1e-6, centre="median")[:, 0]
    assert (out[:5] == 0).all() and (out[5:] < 0).all()


def test_mad_scale_with_std_fallback_and_constant_atoms_give_zero():
    spread = torch.tensor([[0.0], [1.0], [2.0], [3.0], [4.0]])
    out = robust_normalise(spread, 0.0, centre="median")[:, 0]  # med 2, MAD 1
    assert out.tolist() == pytest.approx([-2 / MAD_TO_STD, -1 / MAD_TO_STD, 0, 1 / MAD_TO_STD,
                                          2 / MAD_TO_STD])
    minority = torch.tensor([[1.0], [0.0], [0.0], [0.0]])  # MAD 0 → population std √3/4
    assert robust_normalise(minority, 0.0, centre="median")[0, 0].item() == pytest.approx(
        1 / (3 ** 0.5 / 4))
    constant = torch.tensor([[0.1, -1.0], [0.1, -1.0], [0.1, -1.0]])
    assert torch.equal(robust_normalise(constant, 1e-6), torch.zeros(3, 2, dtype=torch.float64))
    assert robust_normalise(torch.tensor([[1.0, 0.0]]), 1e-6).abs().sum() == 0  # group of one


def test_mean_centring_gives_the_majority_a_small_positive_share():
    # three of four reached the atom: mean 0.75, population std sqrt(0.1875) = 0.4330
    delta = torch.tensor([[1.0], [1.0], [1.0], [0.0]])
    out = robust_normalise(delta, 1e-12).squeeze(1)  # the default centre is the mean
    std = 0.1875 ** 0.5
    assert out.tolist() == pytest.approx([0.25 / std] * 3 + [-0.75 / std])
    median = robust_normalise(delta, 1e-12, centre="median").squeeze(1).tolist()
    assert median[:3] == [0.0, 0.0, 0.0]


def test_an_unknown_centre_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="'median' or 'mean'"):
        robust_normalise(torch.zeros(2, 1), 1e-6, centre="mode")


def _has(var):
    return lambda s, e: Status.SAT if s.get(var) else Status.UNSAT


def test_the_counterfactual_marginal_is_what_each_status_is_worth_to_the_score():
    """Hard ``a`` SAT, hard ``b`` SAT, penalty ``p`` VIOL, prerequisite ``q`` SAT, ``F`` = 0:
    dropping ``p`` to UNSAT gives ``F`` = 1, so ``δ_p = 0 − 1``; dropping ``a`` or ``b`` keeps
    ``F`` = 0; ``q`` has no score role. With ``p`` UNSAT, ``F`` = 1 and each hard atom is worth
    1."""
    atoms = (Atom("a", _has("a"), "online", (), ("a",), "hard"),
             Atom("b", _has("b"), "online", (), ("b",), "hard"),
             Atom("p", lambda s, e: Status.VIOL if s.get("p") else Status.UNSAT, "online", (),
                  ("p",), "penalty"),
             Atom("q", _has("q"), "online", (), ("q",), "prerequisite"))
    verifier = Verifier("cf", atoms, ConjunctiveAggregator.from_atoms(atoms),
                        lambda s: float(bool(s.get("a") and s.get("b") and not s.get("p"))),
                        is_commit=lambda a: False, commit_scope=lambda a: (),
                        extract_evidence=lambda text, state: {})
    final = {"a": True, "b": True, "q": True}
    violated = trace_rollout(verifier, ["s", "t"], [{}, {**final, "p": True}], ["go"])
    clean = trace_rollout(verifier, ["s", "t"], [{}, final], ["go"])
    assert atom_marginals(violated, "counterfactual") == (0.0, 0.0, -1.0, 0.0)
    assert atom_marginals(clean, "counterfactual") == (1.0, 1.0, 0.0, 0.0)
    assert atom_marginals(clean, "status") == clean.delta == (1.0, 1.0, 0.0, 1.0)
