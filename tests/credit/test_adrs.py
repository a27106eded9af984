"""ADRS (docs/adrs.md §5.2–5.5) and the self-distillation baselines' auxiliary losses
(docs/adrs.md §5.6)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcredit.credit import CreditBatch, TokenScores, get_estimator
from agentcredit.credit.adrs import (
    TOKEN_CLASSES,
    ADRSConfig,
    adrs,
    calibrate,
    token_class_gap,
    tva_contrast,
    tva_gate,
    whiten_in_groups,
)
from agentcredit.credit.gigpo import GiGPOConfig, gigpo, gigpo_levels
from agentcredit.credit.grpo import GRPOConfig, grpo
from agentcredit.credit.self_distillation import opsd_loss, sdar_loss
from agentcredit.credit.tokens import to_step_rows

FAST = settings(max_examples=40, deadline=None)


def with_tokens(batch: CreditBatch, tokens_per_step: list[int], seed: int = 0,
                update: int | None = None) -> CreditBatch:
    """``batch`` with random teacher / behaviour / reference log-probs for the given token
    counts."""
    g = torch.Generator().manual_seed(seed)
    n = sum(tokens_per_step)
    token_step = torch.repeat_interleave(torch.arange(len(tokens_per_step)),
                                         torch.tensor(tokens_per_step))
    scores = TokenScores(token_step=token_step,
                         teacher_logprobs=-3 * torch.rand(n, generator=g),
                         behaviour_logprobs=-3 * torch.rand(n, generator=g),
                         ref_logprobs=-3 * torch.rand(n, generator=g), update=update)
    return dataclasses.replace(batch, tokens=scores)


@st.composite
def adrs_batches(draw) -> CreditBatch:
    """Random groups of ALFWorld-like rollouts (outcome 10, penalties −0.1, shared anchors)."""
    rewards, group_ids, anchors, tokens_per_step = [], [], [], []
    for group in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            length = draw(st.integers(1, 4))
            steps = [draw(st.sampled_from([0.0, 0.0, -0.1])) for _ in range(length)]
            steps[-1] += 10.0 * draw(st.booleans())
            rewards.append(steps)
            group_ids.append(group)
            anchors.append([f"state{draw(st.integers(0, 2))}" for _ in range(length)])
            tokens_per_step += [draw(st.integers(1, 5)) for _ in range(length)]
    batch = CreditBatch.from_lists(rewards, group_ids, anchors)
    return with_tokens(batch, tokens_per_step, seed=draw(st.integers(0, 2**31 - 1)))


def step_sums(values: torch.Tensor, batch: CreditBatch) -> torch.Tensor:
    return torch.zeros(batch.num_steps, dtype=torch.float64).index_add_(
        0, batch.tokens.token_step, values.double())


# MODULE 1: WITHIN-STEP CALIBRATION


@FAST
@given(adrs_batches(), st.sampled_from(["global", "per_step", "per_rollout"]))
def test_each_steps_calibrated_scores_sum_to_zero(batch, scope):
    q_hat = adrs(batch, ADRSConfig(scope=scope)).extras["q_hat"]
    assert torch.allclose(step_sums(q_hat, batch),
                          torch.zeros(batch.num_steps, dtype=torch.float64), atol=1e-4)


def test_global_scope_scales_by_one_std_over_every_token_of_the_batch():
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0]], [0, 0]), [3, 2, 4])
    tokens = batch.tokens
    q_hat = calibrate(tokens.teacher_logprobs, tokens.token_step, 3, scope="global",
                      token_rollout=batch.step_rollout[tokens.token_step], num_rollouts=2,
                      eps=1e-8)
    step_mean = step_sums(tokens.teacher_logprobs, batch) / torch.tensor([3.0, 2.0, 4.0])
    q = tokens.teacher_logprobs.double() - step_mean[tokens.token_step]
    assert torch.allclose(q_hat, q / (q.std(correction=0) + 1e-8))
    assert q_hat.std(correction=0).item() == pytest.approx(1.0, abs=1e-6)


def test_per_rollout_scope_gives_each_rollout_unit_spread():
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0], [1.0]], [0, 0, 1]),
                        [3, 2, 4, 5])
    q_hat = adrs(batch, ADRSConfig(scope="per_rollout")).extras["q_hat"]
    rollout = batch.step_rollout[batch.tokens.token_step]
    for i in range(3):
        assert q_hat[rollout == i].double().std(correction=0).item() == pytest.approx(1, abs=1e-5)


def test_per_step_scope_gives_each_step_unit_spread_and_per_rollout_shares_one_scale():
    # one rollout of two steps; q = ℓ^T − b_s is (1, −1) in step 0 and (2, −2) in step 1
    batch = CreditBatch.from_lists([[0.0, 1.0], [0.0, 0.0]], [0, 0])
    batch = dataclasses.replace(batch, tokens=TokenScores(
        token_step=torch.tensor([0, 0, 1, 1, 2, 3]),
        teacher_logprobs=torch.tensor([-1.0, -3.0, -2.0, -6.0, -1.0, -1.0])))
    per_step = adrs(batch, ADRSConfig(scope="per_step")).extras["q_hat"].double()
    per_rollout = adrs(batch, ADRSConfig(scope="per_rollout")).extras["q_hat"].double()
    # per step: each step divided by its own std, 1 and 2; single-token steps stay 0
    assert per_step.tolist() == pytest.approx([1, -1, 1, -1, 0, 0], abs=1e-7)
    # per rollout: one std over (1, −1, 2, −2), sqrt(10 / 4)
    sigma = (10 / 4) ** 0.5
    assert per_rollout.tolist() == pytest.approx([1 / sigma, -1 / sigma, 2 / sigma, -2 / sigma,
                                                  0, 0], abs=1e-7)


def test_the_old_per_seq_scope_name_is_refused_with_both_meanings():
    with pytest.raises(ValueError, match="per_step .* per_rollout"):
        ADRSConfig(scope="per_seq")


# MODULE 2: THE TVA GATE


@FAST
@given(st.lists(st.tuples(st.floats(0.01, 0.99), st.floats(-10, 10)), min_size=2, max_size=8))
def test_tva_contrast_equals_covariance_over_alpha_variance_as_eps_goes_to_zero(units):
    alpha = torch.tensor([a for a, _ in units], dtype=torch.float64)
    returns = torch.tensor([r for _, r in units], dtype=torch.float64)
    d = tva_contrast(alpha, returns, torch.zeros(len(units), dtype=torch.long), 1, eps=1e-12)
    mean_alpha = alpha.mean()
    cov = ((alpha - mean_alpha) * (returns - returns.mean())).mean()
    assert d.item() == pytest.approx((cov / (mean_alpha * (1 - mean_alpha))).item(),
                                     rel=1e-6, abs=1e-9)


@FAST
@given(st.lists(st.tuples(st.floats(0.05, 0.95), st.floats(-10, 10)), min_size=2, max_size=8))
def test_tva_contrast_sign_follows_the_covariance_of_confidence_and_return(units):
    alpha = torch.tensor([a for a, _ in units], dtype=torch.float64)
    returns = torch.tensor([r for _, r in units], dtype=torch.float64)
    cov = ((alpha - alpha.mean()) * (returns - returns.mean())).mean().item()
    d = tva_contrast(alpha, returns, torch.zeros(len(units), dtype=torch.long), 1, eps=1e-8).item()
    if abs(cov) > 1e-6:
        assert (d > 0) == (cov > 0)


def test_gate_opens_when_the_confident_rollouts_won_and_closes_when_they_lost():
    confidence = torch.tensor([-0.5, -2.0, -0.4, -2.2, -0.5, -2.0])
    returns = torch.tensor([10.0, 0.0, 10.0, 0.0, 0.0, 10.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    gate = tva_gate(confidence, returns, groups, 2, temperature=1.0, tau=2.0, eps=1e-8,
                    gate_norm=False)
    assert (gate.gate[:4] > 0.5).all() and (gate.gate[4:] < 0.5).all()
    assert gate.contrast[0] > 0 > gate.contrast[1]


def test_groups_with_fewer_than_two_units_gate_at_one_half_even_with_gate_norm():
    gate = tva_gate(torch.tensor([-0.5, -2.0, -1.0]), torch.tensor([10.0, 0.0, 10.0]),
                    torch.tensor([0, 0, 1]), 2, temperature=1.0, tau=2.0, eps=1e-8,
                    gate_norm=True)
    assert gate.undersized.tolist() == [False, True]
    assert gate.gate[2].item() == 0.5 and gate.contrast[1].item() == 0.0


@pytest.mark.parametrize("level", ["L2", "L3"])
def test_undersized_units_get_gate_one_half_in_the_estimator(level):
    # one rollout per task, every anchor state unique: no group has two units
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0]], [0, 1]), [2, 3, 2])
    gate = adrs(batch, ADRSConfig(gate=level)).extras["token_gate"]
    assert torch.equal(gate, torch.full_like(gate, 0.5))


def test_tva_off_gives_gate_one():
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0]], [0, 0]), [2, 3, 2])
    gate = adrs(batch, ADRSConfig(gate="off")).extras["token_gate"]
    assert torch.equal(gate, torch.ones_like(gate))


def test_l1_gate_is_sigmoid_of_tau_times_teacher_minus_reference():
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0]], [0, 0]), [2, 3, 2])
    tokens = batch.tokens
    gate = adrs(batch, ADRSConfig(gate="L1", tau=2.0)).extras["token_gate"]
    assert torch.allclose(gate, torch.sigmoid(2.0 * (tokens.teacher_logprobs
                                                     - tokens.ref_logprobs)))


def test_l1_gate_without_reference_logprobs_fails_clearly():
    batch = with_tokens(CreditBatch.from_lists([[10.0], [0.0]], [0, 0]), [2, 2])
    batch = dataclasses.replace(batch, tokens=dataclasses.replace(batch.tokens, ref_logprobs=None))
    with pytest.raises(ValueError, match="L1 compares .* reference"):
        adrs(batch, ADRSConfig(gate="L1"))


def test_gate_norm_divides_contrasts_by_their_std_over_units_keeping_the_sign():
    confidence = torch.tensor([-0.5, -2.0, -0.4, -2.2, -0.5, -2.0])
    returns = torch.tensor([10.0, 0.0, 10.0, 0.0, 0.0, 10.0]) * 1e-3  # tiny raw contrasts
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    kwargs = {"temperature": 1.0, "tau": 2.0, "eps": 1e-8}
    raw = tva_gate(confidence, returns, groups, 2, gate_norm=False, **kwargs)
    normed = tva_gate(confidence, returns, groups, 2, gate_norm=True, **kwargs)
    scale = raw.contrast[groups].std(correction=0)
    assert normed.norm_scale == pytest.approx(scale.item())
    assert torch.allclose(normed.gate, torch.sigmoid(2.0 * raw.contrast[groups] / scale))
    assert (raw.gate - 0.5).abs().max() < 0.01 < (normed.gate - 0.5).abs().min()


def test_gate_norm_is_skipped_when_every_contrast_is_zero():
    gate = tva_gate(torch.tensor([-1.0, -2.0]), torch.tensor([5.0, 5.0]),
                    torch.tensor([0, 0]), 1, temperature=1.0, tau=2.0, eps=1e-8, gate_norm=True)
    assert gate.norm_scale is None and torch.equal(gate.gate, torch.full((2,), 0.5,
                                                                          dtype=torch.float64))


# MODULE 3: CREDIT INTEGRATION


@FAST
@given(adrs_batches(), st.sampled_from(["off", "L1", "L2", "L3"]))
def test_whitened_token_path_has_zero_mean_and_unit_variance_per_group(batch, gate):
    extras = adrs(batch, ADRSConfig(gate=gate, eta=0.1)).extras
    z, reward = extras["z_teacher"].double(), extras["teacher_reward"].double()
    token_group = batch.group_index[batch.step_rollout[batch.tokens.token_step]]
    for g in range(batch.num_groups):
        members = token_group == g
        assert z[members].mean().item() == pytest.approx(0.0, abs=1e-5)
        if reward[members].var(correction=0) > 1e-5:
            assert z[members].var(correction=0).item() == pytest.approx(1.0, abs=1e-3)


def test_whitening_is_per_group_and_matches_the_formula():
    values = torch.tensor([1.0, 2.0, 3.0, 10.0, 30.0])
    group = torch.tensor([0, 0, 0, 1, 1])
    z = whiten_in_groups(values, group, 2, eps=1e-8)
    expected = [(v - 2.0) / (2 / 3 + 1e-8) ** 0.5 for v in (1, 2, 3)] + \
               [(v - 20.0) / (100 + 1e-8) ** 0.5 for v in (10, 30)]
    assert torch.allclose(z, torch.tensor(expected, dtype=torch.float64))


@FAST
@given(adrs_batches(), st.sampled_from(["off", "L1", "L2", "L3"]),
       st.sampled_from(["global", "per_step", "per_rollout"]))
def test_eta_zero_reproduces_grpo_advantages_exactly(batch, gate, scope):
    result = adrs(batch, ADRSConfig(backbone="grpo", gate=gate, scope=scope, eta=0.0))
    native = grpo(batch, GRPOConfig()).step_advantages
    assert torch.equal(result.step_advantages, native)
    assert torch.equal(result.token_advantages, native[batch.tokens.token_step])


@FAST
@given(adrs_batches(), st.sampled_from(["off", "L1", "L2", "L3"]))
def test_eta_zero_reproduces_gigpo_advantages_exactly(batch, gate):
    result = adrs(batch, ADRSConfig(backbone="gigpo", gate=gate, eta=0.0))
    native = gigpo(batch, GiGPOConfig()).step_advantages
    assert torch.equal(result.step_advantages, native)
    assert torch.equal(result.token_advantages, native[batch.tokens.token_step])


@FAST
@given(adrs_batches(), st.sampled_from(["off", "L2", "L3"]), st.sampled_from(["grpo", "gigpo"]))
def test_step_shared_gates_keep_the_trajectory_path_and_add_only_eta_z(batch, gate, backbone):
    config = ADRSConfig(backbone=backbone, gate=gate, eta=0.1, token_path_zero_signal="apply")
    result = adrs(batch, config)
    native = (grpo(batch, GRPOConfig()) if backbone == "grpo"
              else gigpo(batch, GiGPOConfig())).step_advantages
    assert torch.equal(result.step_advantages, native)
    expected = native[batch.tokens.token_step] + 0.1 * result.extras["z_teacher"]
    assert torch.allclose(result.token_advantages, expected, atol=1e-6)


def test_l1_gate_shapes_the_returns_through_the_backbones_own_normalisation():
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0], [0.0, 0.0]], [0, 0, 0]),
                        [2, 3, 4, 1, 3])
    result = adrs(batch, ADRSConfig(gate="L1", eta=0.5))
    step_shaping = step_sums(result.extras["teacher_reward"], batch).float()
    shaped = dataclasses.replace(batch, step_rewards=batch.step_rewards + step_shaping)
    assert torch.allclose(result.step_advantages, grpo(shaped, GRPOConfig()).step_advantages,
                          atol=1e-5)
    assert step_shaping.abs().max() > 1e-3  # the token gate really breaks the step zero sum


def test_token_path_alone_keeps_the_base_backbone_and_adds_eta_z_even_under_l1():
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0], [0.0, 0.0]], [0, 0, 0]),
                        [2, 3, 4, 1, 3])
    both = adrs(batch, ADRSConfig(gate="L1", eta=0.5))
    token = adrs(batch, ADRSConfig(gate="L1", eta=0.5, paths="token"))
    base = grpo(batch, GRPOConfig()).step_advantages
    assert torch.equal(token.step_advantages, base)
    assert not torch.allclose(both.step_advantages, base, atol=1e-4)  # L1 shapes the returns
    torch.testing.assert_close(token.token_advantages,
                               base[batch.tokens.token_step] + token.extras["token_path"])
    assert token.extras["token_path"].abs().max() > 1e-3


@pytest.mark.parametrize("gate", ["L1", "L2"])
def test_reward_path_alone_drops_eta_z_and_keeps_the_shaped_trajectory_path(gate):
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0], [0.0, 0.0]], [0, 0, 0]),
                        [2, 3, 4, 1, 3])
    both = adrs(batch, ADRSConfig(gate=gate, eta=0.5))
    reward = adrs(batch, ADRSConfig(gate=gate, eta=0.5, paths="reward"))
    assert torch.equal(reward.step_advantages, both.step_advantages)
    assert torch.equal(reward.token_advantages, both.step_advantages[batch.tokens.token_step])
    assert reward.diagnostics["token_path_active"] == 0.0
    if gate == "L2":  # each step's r^T sums to 0: the reward path alone is the backbone
        assert torch.equal(reward.step_advantages, grpo(batch, GRPOConfig()).step_advantages)


def test_gigpo_adds_the_shaping_to_the_episode_level_and_keeps_the_native_step_level():
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0, 0.0], [-0.1, 10.0]], [0, 0, 0],
                                               [["s", "a"], ["s", "b"], ["s", "a"]]),
                        [2, 3, 4, 1, 3, 2])
    config = ADRSConfig(backbone="gigpo", gate="L1", eta=0.5)
    result = adrs(batch, config)
    gigpo_config = GiGPOConfig()
    shaping = torch.zeros(3, dtype=torch.float64).index_add_(
        0, batch.step_rollout, step_sums(result.extras["teacher_reward"], batch)).float()
    episode = gigpo_levels(batch, gigpo_config, episode_returns=batch.returns + shaping)
    native_step_level = gigpo_levels(batch, gigpo_config).step_adv
    expected = episode.episode_adv[batch.step_rollout] + native_step_level
    assert torch.allclose(result.step_advantages, expected, atol=1e-6)


def test_token_path_window_turns_eta_z_on_after_warmup_and_off_after_the_active_updates():
    config = ADRSConfig(eta=0.1, token_path_warmup=2, token_path_updates=3)
    active = []
    for update in range(1, 8):
        batch = with_tokens(CreditBatch.from_lists([[10.0], [0.0]], [0, 0]), [3, 2],
                            update=update)
        result = adrs(batch, config)
        plain = result.step_advantages[batch.tokens.token_step]
        active.append(not torch.equal(result.token_advantages, plain))
        assert result.diagnostics["token_path_active"] == float(active[-1])
    assert active == [False, False, True, True, True, False, False]


def test_a_token_path_window_without_an_update_index_fails_clearly():
    batch = with_tokens(CreditBatch.from_lists([[10.0], [0.0]], [0, 0]), [3, 2])
    with pytest.raises(ValueError, match="no update index"):
        adrs(batch, ADRSConfig(token_path_warmup=20, token_path_updates=50))


def test_z_clip_bounds_eta_times_z_not_z():
    batch = with_tokens(CreditBatch.from_lists([[10.0, 0.0], [0.0]], [0, 0]), [1, 9, 1], seed=3)
    result = adrs(batch, ADRSConfig(eta=0.1, z_clip=0.1))
    eta_z = 0.1 * result.extras["z_teacher"].double()
    assert eta_z.abs().max() > 0.1  # the bound binds on η·Z^T (clipping Z^T would give 0.01)
    expected = eta_z.clamp(-0.1, 0.1)
    assert torch.allclose(result.extras["token_path"].double(), expected, atol=1e-7)
    plain = result.step_advantages[batch.tokens.token_step].double()
    assert torch.allclose(result.token_advantages.double(), plain + expected, atol=1e-6)


def test_adaptive_clip_scales_each_groups_bound_by_its_strength_over_the_median():
    # group strengths max|A^traj| under Dr.GRPO: 5, 1 and 0.5; median 1 (lower middle)
    batch = CreditBatch.from_lists([[10.0], [0.0], [2.0], [0.0], [1.0], [0.0]],
                                   [0, 0, 1, 1, 2, 2])
    batch = with_tokens(batch, [1, 9, 1, 9, 1, 9], seed=3)
    config = ADRSConfig(backbone={"name": "grpo", "norm_by_std": False}, eta=1.0, z_clip=0.3,
                        z_clip_adaptive=True)
    path = adrs(batch, config).extras["token_path"].double()
    token_group = batch.group_index[batch.step_rollout[batch.tokens.token_step]]
    bounds = [0.3, 0.3, 0.3 * 0.5 / (1 + 1e-6)]
    for g, bound in enumerate(bounds):
        assert path[token_group == g].abs().max().item() == pytest.approx(bound, rel=1e-6)


def test_adaptive_clip_without_a_bound_fails_clearly():
    with pytest.raises(ValueError, match="z_clip_adaptive = True .* z_clip"):
        ADRSConfig(z_clip_adaptive=True)


# ZERO-SIGNAL GROUPS (docs/adrs.md §5.4)


@pytest.mark.parametrize("backbone", ["grpo", "gigpo"])
def test_groups_without_return_signal_get_exactly_the_backbone_advantage_under_skip(backbone):
    # group 0 all fail, group 1 one rollout, group 2 informative
    batch = CreditBatch.from_lists([[0.0, 0.0], [0.0], [10.0], [10.0], [0.0]], [0, 0, 1, 2, 2])
    batch = with_tokens(batch, [3, 2, 4, 3, 2, 5], seed=1)
    native = (grpo(batch, GRPOConfig()) if backbone == "grpo"
              else gigpo(batch, GiGPOConfig())).step_advantages[batch.tokens.token_step]
    token_group = batch.group_index[batch.step_rollout[batch.tokens.token_step]]
    skipped = adrs(batch, ADRSConfig(backbone=backbone, eta=0.1))
    applied = adrs(batch, ADRSConfig(backbone=backbone, eta=0.1, token_path_zero_signal="apply"))
    silent = token_group < 2
    assert torch.equal(skipped.token_advantages[silent], native[silent])
    assert (applied.token_advantages[silent] - native[silent]).abs().max() > 0.05
    assert torch.equal(skipped.token_advantages[~silent], applied.token_advantages[~silent])
    assert skipped.diagnostics["zero_signal_group_share"] == pytest.approx(2 / 3)


def test_adrs_without_teacher_scores_says_how_to_provide_them():
    with pytest.raises(ValueError, match="TokenScores.from_step_rows"):
        adrs(CreditBatch.from_lists([[10.0], [0.0]], [0, 0]), ADRSConfig())


def test_adrs_is_registered_and_built_from_flat_options_like_the_trainer_does():
    estimator = get_estimator("adrs")
    options = {"backbone": "gigpo", "gate": "L3", "gate_norm": True}  # credit.options
    config = estimator.config_cls(**options)
    batch = with_tokens(CreditBatch.from_lists([[10.0], [0.0]], [0, 0]), [3, 2])
    assert estimator(batch, config).token_advantages.shape == (5,)


@pytest.mark.parametrize("field, value, message", [
    ("gate", "L4", "ADRSConfig.gate = 'L4' is not allowed; choose one of off, L1, L2, L3"),
    ("backbone", "rloo", "ADRSConfig.backbone.name = 'rloo' is not allowed"),
    ("eta", -0.1, "ADRSConfig.eta = -0.1"),
    ("scope", "batch", "ADRSConfig.scope = 'batch'"),
    ("token_path_zero_signal", "drop", "ADRSConfig.token_path_zero_signal = 'drop'"),
    ("token_path_updates", 0, "ADRSConfig.token_path_updates = 0"),
])
def test_config_errors_name_the_field_and_the_bad_value(field, value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        ADRSConfig(**{field: value})


def test_diagnostics_report_gates_per_level_and_the_share_of_large_scores():
    batch = with_tokens(CreditBatch.from_lists([[0.0, 10.0], [0.0, 0.0]], [0, 0]), [3, 2, 4, 2])
    diagnostics = adrs(batch, ADRSConfig()).diagnostics
    for level in ("L1", "L2", "L3"):
        assert {f"gate_mean.{level}", f"gate_std.{level}", f"gate_up_share.{level}"} <= \
            diagnostics.keys()
    q_hat = adrs(batch, ADRSConfig()).extras["q_hat"]
    assert diagnostics["q_hat_abs_gt1_share"] == pytest.approx((q_hat.abs() > 1).float().mean())
    assert "teacher_minus_behaviour_mean" in diagnostics


# TOKEN LAYOUT


def test_token_scores_from_step_rows_list_tokens_step_by_step_and_scatter_back():
    loss_mask = torch.tensor([[0, 1, 1, 0], [0, 0, 1, 1], [1, 0, 0, 0]], dtype=torch.bool)
    teacher = torch.arange(12, dtype=torch.float32).view(3, 4)
    scores = TokenScores.from_step_rows(loss_mask, teacher)
    assert scores.token_step.tolist() == [0, 0, 1, 1, 2]
    assert scores.teacher_logprobs.tolist() == [1, 2, 6, 7, 8]
    assert torch.equal(to_step_rows(scores.teacher_logprobs, loss_mask), teacher * loss_mask)


@pytest.mark.parametrize("token_step, message", [
    ([0, 0, 2], "step 1 has no valid response token"),
    ([1, 0, 2], "token_step decreases"),
    ([0, 1, 5], "outside 0..2"),
])
def test_credit_batch_rejects_token_scores_that_do_not_fit_its_steps(token_step, message):
    batch = CreditBatch.from_lists([[0.0, 10.0], [0.0]], [0, 0])
    scores = TokenScores(token_step=torch.tensor(token_step), teacher_logprobs=torch.zeros(3))
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(batch, tokens=scores)


def test_backbones_ignore_token_scores():
    batch = CreditBatch.from_lists([[0.0, 10.0], [0.0]], [0, 0])
    assert torch.equal(grpo(with_tokens(batch, [2, 1, 3]), GRPOConfig()).step_advantages,
                       grpo(batch, GRPOConfig()).step_advantages)


# PROBE DIAGNOSTIC


def test_token_class_gap_averages_teacher_minus_behaviour_per_class():
    classes = torch.tensor([0, 1, 1, 2, 0])
    teacher = torch.tensor([-1.0, -2.0, -3.0, -4.0, -0.5])
    behaviour = torch.tensor([-2.0, -2.0, -2.0, -4.0, -1.5])
    gap = token_class_gap(classes, teacher, behaviour)
    assert gap == {"tokens.action": 2.0, "gap.action": 1.0, "tokens.object": 2.0,
                   "gap.object": -0.5, "tokens.other": 1.0, "gap.other": 0.0}
    assert TOKEN_CLASSES == ("action", "object", "other")


# SELF-DISTILLATION BASELINES (docs/adrs.md §5.6)


def test_opsd_gradient_pulls_the_student_toward_the_teacher_token_by_token():
    logprobs = torch.tensor([[-1.0, -1.0, -1.0]], requires_grad=True)
    teacher = torch.tensor([[-0.2, -3.0, -5.0]])
    mask = torch.tensor([[True, True, False]])
    loss, stats = opsd_loss(logprobs, teacher, mask, beta=0.1)
    loss.backward()
    # descent raises ℓ_θ where the teacher is likelier, lowers it where it is not
    assert logprobs.grad[0, 0] < 0 < logprobs.grad[0, 1] and logprobs.grad[0, 2] == 0
    assert torch.allclose(logprobs.grad, 0.1 * torch.tensor([[-0.8, 2.0, 0.0]]) / 2)
    assert stats["opsd_gap"] == pytest.approx((-0.8 + 2.0) / 2)


def test_sdar_is_opsd_weighted_by_the_confidence_gate():
    logprobs = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    teacher = torch.tensor([[-0.2, -3.0, -0.1]])
    behaviour = torch.tensor([[-1.0, -2.0, -0.5]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    loss, stats = sdar_loss(logprobs, teacher, behaviour, mask, beta=0.1, tau=2.0)
    loss.backward()
    gate = torch.sigmoid(2.0 * (teacher - behaviour))
    assert torch.allclose(logprobs.grad, 0.1 * gate * (logprobs.detach() - teacher) / 3)
    assert stats["sdar_gate_mean"] == pytest.approx(gate.mean().item())


def test_distillation_losses_accumulate_over_micro_batches_with_a_shared_normalizer():
    logprobs = -torch.rand(4, 5)
    teacher = -torch.rand(4, 5)
    mask = torch.rand(4, 5) > 0.3
    whole, _ = opsd_loss(logprobs, teacher, mask)
    parts = sum(opsd_loss(logprobs[rows], teacher[rows], mask[rows], normalizer=mask.sum())[0]
                for rows in (slice(0, 1), slice(1, 4)))
    assert torch.allclose(whole, parts)


# HAND-COMPUTED EXAMPLES (docs/adrs.md §5.2–5.4): every expected number comes from the formulas


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_l2_worked_example_teacher_reward_and_final_advantage():
    # one task, two one-step rollouts: the winner's tokens are the teacher-confident ones
    batch = CreditBatch.from_lists([[1.0], [0.0]], [0, 0])
    batch = dataclasses.replace(batch, tokens=TokenScores(
        token_step=torch.tensor([0, 0, 1, 1]),
        teacher_logprobs=torch.tensor([-1.0, -3.0, -3.0, -5.0]),
        # ℓ^b ranks the rollouts the other way round: a gate read from ℓ^b would close
        behaviour_logprobs=torch.tensor([-4.0, -4.0, -1.0, -1.0])))
    result = adrs(batch, ADRSConfig(gate="L2", eta=0.1, scope="global"))
    # b_s = −2, −4; q = (1, −1, 1, −1); σ_q = 1 over the batch
    q_hat = [v / (1 + 1e-8) for v in (1, -1, 1, -1)]
    # ℓ̄^T = −2, −4, batch mean −3: α = sigmoid(±1), α_0 + α_1 = 1
    a0, a1 = sigmoid(1.0), sigmoid(-1.0)
    mu_plus = (a0 * 1.0 + a1 * 0.0) / (a0 + a1 + 1e-8)
    mu_minus = ((1 - a0) * 1.0 + (1 - a1) * 0.0) / ((1 - a0) + (1 - a1) + 1e-8)
    m = sigmoid(2.0 * (mu_plus - mu_minus))  # ≈ 0.716: confidence went with the win
    assert m == pytest.approx(sigmoid(2 * math.tanh(0.5)), rel=1e-7)
    reward = [0.1 * m * q for q in q_hat]
    assert result.extras["token_gate"].tolist() == pytest.approx([m] * 4, rel=1e-6)
    assert result.extras["teacher_reward"].tolist() == pytest.approx(reward, rel=1e-6)
    # A^traj = ±0.5 / (0.5 + 1e-6); Z^T = r^T / sqrt(Var r^T + ε), Var r^T = (0.1 m q̂)²
    a_traj = 0.5 / (0.5 + 1e-6)
    z = [r / math.sqrt((0.1 * m * q_hat[0]) ** 2 + 1e-8) for r in reward]
    expected = [a_traj + 0.1 * z[0], a_traj + 0.1 * z[1], -a_traj + 0.1 * z[2],
                -a_traj + 0.1 * z[3]]
    assert result.token_advantages.tolist() == pytest.approx(expected, rel=1e-6)


def test_l3_worked_example_gates_anchor_groups_on_the_discounted_return_to_go():
    # one task, two rollouts of two steps; both start in state s, then part (a vs b)
    batch = CreditBatch.from_lists([[0.0, 1.0], [0.0, 0.0]], [0, 0], [["s", "a"], ["s", "b"]])
    batch = dataclasses.replace(batch, tokens=TokenScores(
        token_step=torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]),
        teacher_logprobs=torch.tensor([-1.0, -3.0, -1.0, -3.0, -3.0, -5.0, -3.0, -5.0])))
    result = adrs(batch, ADRSConfig(gate="L3", eta=0.1, gamma=0.95, scope="global"))
    # q = ±1 in every step, σ_q = 1
    q_hat = [v / (1 + 1e-8) for v in (1, -1) * 4]
    # units = steps; ℓ̄^T = −2, −2, −4, −4, batch mean −3: α = sigmoid(1) for rollout 0's steps
    a0, a1 = sigmoid(1.0), sigmoid(-1.0)
    # state s holds steps (0, 0) and (1, 0) with G = 0 + 0.95·1 and 0; a and b hold one step each
    g0, g1 = 0.95 * 1.0, 0.0
    mu_plus = (a0 * g0 + a1 * g1) / (a0 + a1 + 1e-8)
    mu_minus = ((1 - a0) * g0 + (1 - a1) * g1) / ((1 - a0) + (1 - a1) + 1e-8)
    m_s = sigmoid(2.0 * (mu_plus - mu_minus))
    gate = [m_s, m_s, 0.5, 0.5, m_s, m_s, 0.5, 0.5]
    reward = [0.1 * m * q for m, q in zip(gate, q_hat, strict=True)]
    assert result.extras["token_gate"].tolist() == pytest.approx(gate, rel=1e-6)
    assert result.extras["teacher_reward"].tolist() == pytest.approx(reward, rel=1e-6)
    # Z^T whitens r^T (not q̂) over the task's 8 tokens: mean 0, Var = (0.1)²(m_s² + 0.25)/2
    var = 0.1 ** 2 * (m_s ** 2 + 0.25) / 2 / (1 + 1e-8) ** 2
    z = [r / math.sqrt(var + 1e-8) for r in reward]
    a_traj = 0.5 / (0.5 + 1e-6)  # GRPO on the returns 1 and 0
    expected = [(a_traj if i < 4 else -a_traj) + 0.1 * z[i] for i in range(8)]
    assert result.token_advantages.tolist() == pytest.approx(expected, rel=1e-6)
