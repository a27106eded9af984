import pytest
import torch

from agentcredit.credit.vict.normalise import MAD_TO_STD, robust_normalise


def test_median_centring_credits_only_the_rollouts_that_differ_from_the_majority():
    delta = torch.tensor([[1.0], [1.0], [1.0], [1.0], [1.0], [0.0], [0.0], [0.0]])  # 5 of 8 reached
    out = robust_normalise(delta, 1e-6)[:, 0]
    assert (out[:5] == 0).all() and (out[5:] < 0).all()


def test_mad_scale_with_std_fallback_and_constant_atoms_give_zero():
    spread = torch.tensor([[0.0], [1.0], [2.0], [3.0], [4.0]])
    out = robust_normalise(spread, 0.0)[:, 0]  # med 2, MAD 1
    assert out.tolist() == pytest.approx([-2 / MAD_TO_STD, -1 / MAD_TO_STD, 0, 1 / MAD_TO_STD,
                                          2 / MAD_TO_STD])
    minority = torch.tensor([[1.0], [0.0], [0.0], [0.0]])  # MAD 0 → population std √3/4
    assert robust_normalise(minority, 0.0)[0, 0].item() == pytest.approx(1 / (3 ** 0.5 / 4))
    constant = torch.tensor([[0.1, -1.0], [0.1, -1.0], [0.1, -1.0]])
    assert torch.equal(robust_normalise(constant, 1e-6), torch.zeros(3, 2, dtype=torch.float64))
    assert robust_normalise(torch.tensor([[1.0, 0.0]]), 1e-6).abs().sum() == 0  # group of one
