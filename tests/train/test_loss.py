"""ppo_loss (docs/backbones.md §1): gradient at ratio 1, clip bounds, masking, KL, gradient
accumulation."""

from __future__ import annotations

import math

import pytest
import torch

from agentcredit.train.loss import ppo_loss


def _batch(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(3, 6, generator=gen) * 3  # [B, L] log-probs
    adv = torch.randn(3, 6, generator=gen)
    mask = torch.tensor([[0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1], [1, 1, 0, 1, 1, 0]])
    return old, adv, mask


def _grad(loss_fn, logprobs):
    logprobs = logprobs.clone().requires_grad_(True)
    loss, stats = loss_fn(logprobs)
    loss.backward()
    return logprobs.grad, stats


def test_at_ratio_one_gradient_is_advantage_weighted_logprob_gradient():
    old, adv, mask = _batch()
    grad, stats = _grad(lambda lp: ppo_loss(lp, old, old, adv, mask, kl_coef=0.0), old)
    n_valid = mask.sum()
    torch.testing.assert_close(grad, -adv * mask / n_valid)
    assert stats["ratio_mean"] == pytest.approx(1.0)
    assert stats["clip_frac"] == 0 and stats["approx_kl"] == pytest.approx(0.0, abs=1e-7)
    assert stats["pg_loss"] == pytest.approx(float(-(adv * mask).sum() / n_valid), rel=1e-5)


@pytest.mark.parametrize(("clip_low", "clip_high"), [(0.2, 0.2), (0.2, 0.28)])
def test_clipping_engages_exactly_past_the_asymmetric_bounds(clip_low, clip_high):
    delta = 1e-3
    # Columns: ratio just inside / just past the upper bound, just inside / just past the lower.
    ratios = torch.tensor(
        [1 + clip_high - delta, 1 + clip_high + delta, 1 - clip_low + delta, 1 - clip_low - delta]
    )
    old = torch.zeros(2, 4)
    logprobs = torch.log(ratios).expand(2, 4)
    adv = torch.tensor([[1.0], [-1.0]]).expand(2, 4)  # row 0: A > 0, row 1: A < 0
    mask = torch.ones(2, 4)
    grad, stats = _grad(
        lambda lp: ppo_loss(lp, old, None, adv, mask, clip_low, clip_high, 0.0), logprobs
    )

    # A > 0 is clipped only above 1 + ε_hi; A < 0 only below 1 − ε_lo.
    clipped = torch.tensor([[False, True, False, False], [False, False, False, True]])
    assert (grad[clipped] == 0).all()
    assert (grad[~clipped] != 0).all()
    torch.testing.assert_close(grad[~clipped], (-adv * ratios / 8)[~clipped])
    assert stats["clip_frac"] == pytest.approx(2 / 8)


def test_upper_bound_differs_from_lower_when_clip_high_is_larger():
    # ω = 1.25 with A > 0 is clipped under ε_hi = 0.2 but not under ε_hi = 0.28.
    old, adv, mask = torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1)
    logprobs = torch.full((1, 1), math.log(1.25))
    symmetric, _ = _grad(lambda lp: ppo_loss(lp, old, None, adv, mask, 0.2, 0.2, 0.0), logprobs)
    asymmetric, _ = _grad(lambda lp: ppo_loss(lp, old, None, adv, mask, 0.2, 0.28, 0.0), logprobs)
    assert symmetric.item() == 0
    assert asymmetric.item() == pytest.approx(-1.25)


def test_masked_tokens_get_zero_gradient_even_with_garbage_values():
    old, adv, mask = _batch()
    logprobs = old + 0.1 * torch.randn(3, 6, generator=torch.Generator().manual_seed(2))
    logprobs = torch.where(mask.bool(), logprobs, torch.tensor(1e4))  # nonsense on padding
    ref = torch.where(mask.bool(), old, torch.tensor(-1e4))
    grad, stats = _grad(lambda lp: ppo_loss(lp, old, ref, adv, mask, kl_coef=0.5), logprobs)
    assert torch.isfinite(grad).all()
    assert (grad[~mask.bool()] == 0).all()
    assert (grad[mask.bool()] != 0).all()
    assert all(math.isfinite(v) for v in stats.values())


def test_kl_is_zero_when_ref_equals_current_and_positive_otherwise():
    old, adv, mask = _batch()
    _, same = ppo_loss(old, old, old, adv, mask)
    assert same["kl"] == pytest.approx(0.0, abs=1e-7)
    shifted = old + torch.linspace(-0.5, 0.5, 6)
    loss, differ = ppo_loss(old, old, shifted, adv, mask, kl_coef=0.1)
    assert differ["kl"] > 0
    assert loss.item() == pytest.approx(differ["pg_loss"] + 0.1 * differ["kl"], rel=1e-5)


def test_advantages_are_detached():
    old, adv, mask = _batch()
    adv = adv.clone().requires_grad_(True)
    loss, _ = ppo_loss(old.clone().requires_grad_(True), old, old, adv, mask)
    loss.backward()
    assert adv.grad is None


def test_micro_batches_with_the_mini_batch_normalizer_sum_to_the_mini_batch_loss():
    old, adv, mask = _batch()
    logprobs = old + 0.3 * torch.randn(3, 6, generator=torch.Generator().manual_seed(3))
    ref = old - 0.2
    full_grad, full_stats = _grad(lambda lp: ppo_loss(lp, old, ref, adv, mask), logprobs)

    leaf = logprobs.clone().requires_grad_(True)
    total = mask.sum()
    summed = dict.fromkeys(full_stats, 0.0)
    for rows in (slice(0, 1), slice(1, 3)):
        loss, stats = ppo_loss(
            leaf[rows], old[rows], ref[rows], adv[rows], mask[rows], normalizer=total
        )
        loss.backward()
        summed = {k: summed[k] + stats[k] for k in summed}
    torch.testing.assert_close(leaf.grad, full_grad)
    assert summed == pytest.approx(full_stats, rel=1e-5, abs=1e-7)


def test_all_masked_batch_gives_zero_loss():
    old, adv, _ = _batch()
    loss, stats = ppo_loss(old, old, old, adv, torch.zeros(3, 6))
    assert loss.item() == 0 and stats["clip_frac"] == 0


def test_kl_coef_without_reference_is_refused():
    old, adv, mask = _batch()
    with pytest.raises(ValueError, match="ref_logprobs"):
        ppo_loss(old, old, None, adv, mask, kl_coef=0.01)


def test_policy_gradient_weight_scales_the_surrogate_and_zero_removes_it():
    old, adv, mask = _batch()
    logprobs = old + 0.05 * torch.randn(old.shape, generator=torch.Generator().manual_seed(3))
    full, _ = _grad(lambda lp: ppo_loss(lp, old, None, adv, mask, kl_coef=0.0), logprobs)
    half, _ = _grad(lambda lp: ppo_loss(lp, old, None, adv, mask, kl_coef=0.0, pg_coef=0.5),
                    logprobs)
    torch.testing.assert_close(half, 0.5 * full)
    off = logprobs.clone().requires_grad_(True)
    loss, stats = ppo_loss(off, old, None, adv, mask, kl_coef=0.0, pg_coef=0.0)
    loss.backward()
    assert loss.item() == 0.0 and stats["pg_loss"] != 0.0  # the surrogate is still reported
    torch.testing.assert_close(off.grad, torch.zeros_like(off))


def test_entropy_bonus_subtracts_its_weight_times_the_token_mean_entropy():
    old = torch.tensor([[-1.0, -2.0, -3.0]])
    mask = torch.tensor([[1, 1, 0]])
    entropy = torch.tensor([[0.5, 1.5, 9.0]], requires_grad=True)  # third token is padding
    loss, _ = ppo_loss(old, old, None, torch.zeros(1, 3), mask, kl_coef=0.0, entropy=entropy,
                       entropy_coef=0.1)
    assert loss.item() == pytest.approx(-0.1 * (0.5 + 1.5) / 2)
    loss.backward()
    torch.testing.assert_close(entropy.grad, torch.tensor([[-0.05, -0.05, 0.0]]))
    with pytest.raises(ValueError, match="entropy_coef=0.1 needs the token entropies"):
        ppo_loss(old, old, None, torch.zeros(1, 3), mask, kl_coef=0.0, entropy_coef=0.1)
