import random

import pytest
import torch

from agentcredit.credit import CreditBatch
from agentcredit.credit.vict import EligibilityError, VICTConfig, compute_credit
from agentcredit.credit.vict.ablations import spread_witnesses
from agentcredit.credit.vict.correction import (
    Contribution,
    assemble,
    check_eligibility,
    correction_scale,
    final_advantage,
    signal_steps,
)
from agentcredit.credit.vict.method import CreditRule

from .synthetic import synthetic_group


def test_lambda_and_clip_follow_spec_4_6_over_the_steps_of_the_batch():
    base = torch.tensor([1.0, 1.0, 2.0, 0.0])
    vict = torch.tensor([0.0, 2.0, 0.0, -4.0], dtype=torch.float64)
    signal = torch.ones(4, dtype=torch.bool)
    lam, clip = correction_scale(base, vict, gamma_lambda=0.5, eps=1e-6, clip_quantile=0.95,
                                 base_steps="signal", signal=signal)
    # median|A^base| over {0, 1, 1, 2} = 1; median over the non-zero |A^VICT| {2, 4} = 3;
    # c = the 0.95 quantile of {0, 1, 1, 2} = 1 + 0.85·1 = 1.85
    assert lam == pytest.approx(0.5 * 1.0 / (3.0 + 1e-6)) and clip == pytest.approx(1.85)
    final, correction = final_advantage(base, vict, lam, clip)
    assert correction.tolist() == pytest.approx([0.0, lam * 1.85, 0.0, -lam * 1.85])
    assert torch.equal(final, base + correction)


def test_lambda_is_zero_only_without_corrections():
    base = torch.tensor([0.0, 0.0, 0.0, 2.0])
    signal = torch.tensor([False, False, True, True])
    assert correction_scale(base, torch.zeros(4, dtype=torch.float64), gamma_lambda=0.5,
                            eps=1e-6, clip_quantile=0.95, base_steps="signal",
                            signal=signal)[0] == 0.0
    vict = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    lam, clip = correction_scale(base, vict, gamma_lambda=0.5, eps=1e-6, clip_quantile=0.95,
                                 base_steps="signal", signal=signal)
    # pool = steps 2, 3 ({0, 2}): median 1, c = 0 + 0.95·2 = 1.9; median|A^VICT| = 1
    assert lam == pytest.approx(0.5, rel=1e-5) and clip == pytest.approx(1.9)


def test_groups_without_signal_never_switch_vict_off():
    # one informative group (1 success in 4) and three all-fail groups: under the papers'
    # all-steps median, 12 of 16 steps have A^base = 0 and λ = c = 0
    base = torch.tensor([1.5, -0.5, -0.5, -0.5] + [0.0] * 12)
    group = torch.tensor([0] * 4 + [1] * 4 + [2] * 4 + [3] * 4)
    vict = torch.zeros(16, dtype=torch.float64)
    vict[0], vict[1] = 0.8, -0.4
    signal = signal_steps(base, group, 4)
    assert signal.tolist() == [True] * 4 + [False] * 12
    lam, clip = correction_scale(base, vict, gamma_lambda=0.5, eps=1e-6, clip_quantile=0.95,
                                 base_steps="signal", signal=signal)
    # median|A^base| over {1.5, .5, .5, .5} = 0.5; median{0.8, 0.4} = 0.6
    assert lam == pytest.approx(0.5 * 0.5 / 0.600001) and clip == pytest.approx(1.35)
    alone = correction_scale(base[:4], vict[:4], gamma_lambda=0.5, eps=1e-6,
                             clip_quantile=0.95, base_steps="signal", signal=signal[:4])
    assert alone == pytest.approx((lam, clip))
    literal = correction_scale(base, vict, gamma_lambda=0.5, eps=1e-6, clip_quantile=0.95,
                               base_steps="all")
    assert literal == (0.0, pytest.approx(0.75))  # the collapse the signal pool prevents


def test_atom_shares_add_up_per_step():
    shares = [Contribution(0, 1, 1, "a", 2.0, 1.0, 0.5, ("write",), ("s",)),
              Contribution(0, 1, 1, "b", -1.0, 1.0, 1.0, ("commit",), ("s",)),
              Contribution(0, 2, 2, "a", 2.0, 1.0, 0.5, ("write",), ("s",))]
    assert assemble(shares, 4).tolist() == [0.0, 0.0, 1.0, 0.0]


def _batch(seed=3):
    traces = synthetic_group("t", 8, 6, 12, random.Random(seed))
    rewards = [[0.0] * (t.num_steps - 1) + [10.0 * t.v_score] for t in traces]
    return CreditBatch.from_lists(rewards, [0] * 8, traces=traces)


def _credited_batch():
    for seed in range(50):
        batch = _batch(seed)
        if compute_credit(batch, VICTConfig()).vict.any():
            return batch
    raise AssertionError("no synthetic group with a correction")


def test_a_correction_without_a_proof_edge_raises_instead_of_being_counted():
    batch = _credited_batch()
    computation = compute_credit(batch, VICTConfig())
    args = (batch.step_rollout.tolist(), batch.step_index.tolist(), batch.traces,
            computation.conforming, [r.core for r in computation.rollouts],
            [r.delta_hat for r in computation.rollouts])
    assert check_eligibility(computation.vict, *args) == int((computation.vict != 0).sum())
    forged = torch.ones_like(computation.vict)  # credit on every step
    with pytest.raises(EligibilityError, match="has no proof"):
        check_eligibility(forged, *args)
    with pytest.raises(EligibilityError, match="non-conforming"):
        check_eligibility(computation.vict, *args[:3], [False] * 8, *args[4:])


def test_the_pipeline_enforces_the_invariant_on_every_batch():
    broken = CreditRule("vict", spread_witnesses, eligibility=True)  # credits steps without edges
    with pytest.raises(EligibilityError):
        compute_credit(_credited_batch(), VICTConfig(), broken)


def test_vict_without_traces_says_how_to_build_them():
    batch = CreditBatch.from_lists([[0.0, 1.0]], [0])
    with pytest.raises(ValueError, match="trace_rollout"):
        compute_credit(batch, VICTConfig())


def test_a_batch_rejects_traces_that_do_not_match_its_rollouts():
    batch = _batch()
    rewards = [[0.0] * t.num_steps for t in batch.traces]
    with pytest.raises(ValueError, match="7 traces but the batch has 8 rollouts"):
        CreditBatch.from_lists(rewards, [0] * 8, traces=batch.traces[:7])
    short = [[0.0] * (t.num_steps + 1) for t in batch.traces]
    with pytest.raises(ValueError, match="trace exactly the steps that were batched"):
        CreditBatch.from_lists(short, [0] * 8, traces=batch.traces)


def test_config_errors_name_the_field_and_the_allowed_values():
    with pytest.raises(ValueError, match="backbone.name = 'ppo' is not allowed; choose one of "
                                         "grpo, rloo, gigpo"):
        VICTConfig(backbone="ppo")
    with pytest.raises(ValueError, match=r"budget = 0 is out of range; allowed \[1, 1000\]"):
        VICTConfig(budget=0)
    with pytest.raises(ValueError, match=r"clip_quantile = 1.5 is out of range"):
        VICTConfig(clip_quantile=1.5)
    with pytest.raises(ValueError, match=r"backbone.mode = 'x' is not allowed"):
        VICTConfig(backbone={"name": "gigpo", "mode": "x"})


def test_a_backbone_is_a_typed_config_chosen_by_name():
    from agentcredit.credit.gigpo import GiGPOConfig

    config = VICTConfig(backbone={"name": "gigpo", "mode": "mean_norm"})
    assert config.backbone == GiGPOConfig(mode="mean_norm")
    assert VICTConfig(backbone="rloo").backbone.config_name == "rloo"
