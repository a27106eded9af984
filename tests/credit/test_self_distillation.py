"""The baselines Skill-SD and RLSD of docs/adrs.md §5.6 on hand-computed tokens."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from agentcredit.credit import CreditBatch, TokenScores, get_estimator
from agentcredit.credit.grpo import GRPOConfig, grpo
from agentcredit.credit.self_distillation import (
    RLSDConfig,
    rlsd_token_advantages,
    skill_sd_loss,
)

# SKILL-SD: β · mean_V ρ·k3,  ρ = exp(ℓ_θ − ℓ^b),  k3 = exp(ℓ^T − ℓ_θ) − 1 + (ℓ_θ − ℓ^T)


def test_skill_sd_loss_and_gradient_match_the_hand_computed_k3_weighted_by_rho():
    student = torch.tensor([[-1.0, -2.0, -9.0]], requires_grad=True)  # third token is padding
    teacher = torch.tensor([[-1.5, -1.0, 0.0]])
    behaviour = torch.tensor([[-1.0, -2.5, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    loss, stats = skill_sd_loss(student, teacher, behaviour, mask, beta=0.1)
    # token 1: gap 0.5, ρ = 1;  token 2: gap −1, ρ = e^0.5
    k3 = [math.exp(-0.5) - 1 + 0.5, math.exp(1.0) - 1 - 1.0]
    rho = [1.0, math.exp(0.5)]
    assert loss.item() == pytest.approx(0.1 * (rho[0] * k3[0] + rho[1] * k3[1]) / 2)
    loss.backward()
    # d(ρ k3)/dℓ_θ = ρ k3 + ρ (1 − e^{ℓ^T − ℓ_θ}): token 1 → 0.5, token 2 → e^0.5 · (−1)
    expected = [0.1 / 2 * 0.5, 0.1 / 2 * -math.exp(0.5), 0.0]
    torch.testing.assert_close(student.grad, torch.tensor([expected]))
    assert stats["skill_sd_gap"] == pytest.approx((0.5 - 1.0) / 2)
    assert stats["skill_sd_k3"] == pytest.approx(sum(k3) / 2)


def test_skill_sd_is_zero_with_zero_gradient_where_student_teacher_and_behaviour_agree():
    student = torch.tensor([[-0.7, -1.3]], requires_grad=True)
    loss, _ = skill_sd_loss(student, student.detach(), student.detach(), torch.ones(1, 2))
    loss.backward()
    assert loss.item() == 0.0
    torch.testing.assert_close(student.grad, torch.zeros(1, 2))


# RLSD: Â = A · ((1 − λ) + λ · clip(exp(sign(A)·(ℓ^T − ℓ^b)), 1 ± ε_w))

STEP_ADV = torch.tensor([1.0, -0.5])  # one step with A > 0, one with A < 0
TOKEN_STEP = torch.tensor([0, 0, 1, 1])
BEHAVIOUR = torch.tensor([-1.0, -1.0, -1.0, -1.0])
TEACHER = torch.tensor([-0.9, -1.5, -0.9, -1.5])  # ℓ^T − ℓ^b = 0.1, −0.5, 0.1, −0.5


def test_rlsd_reweights_each_token_by_the_clipped_teacher_ratio():
    adv = rlsd_token_advantages(STEP_ADV, TOKEN_STEP, TEACHER, BEHAVIOUR, RLSDConfig())
    expected = [
        1.0 * (0.5 + 0.5 * math.exp(0.1)),  # w = e^0.1 = 1.105, inside [0.8, 1.2]
        1.0 * (0.5 + 0.5 * 0.8),  # w = e^−0.5 = 0.607, clipped up to 0.8
        -0.5 * (0.5 + 0.5 * math.exp(-0.1)),  # sign(A) = −1: w = e^−0.1
        -0.5 * (0.5 + 0.5 * 1.2),  # w = e^0.5 = 1.65, clipped down to 1.2
    ]
    torch.testing.assert_close(adv, torch.tensor(expected))


def test_rlsd_with_negative_reset_keeps_the_advantage_of_failed_rollouts():
    adv = rlsd_token_advantages(STEP_ADV, TOKEN_STEP, TEACHER, BEHAVIOUR,
                                RLSDConfig(neg_reset=True))
    torch.testing.assert_close(adv[2:], torch.tensor([-0.5, -0.5]))


def test_rlsd_with_lambda_zero_is_grpo_and_the_estimator_reweights_grpo():
    batch = CreditBatch.from_lists([[0.0, 1.0], [0.0]], [0, 0])  # 2 rollouts, 3 steps
    tokens = TokenScores(token_step=torch.tensor([0, 0, 1, 2]),
                         teacher_logprobs=torch.tensor([-0.9, -1.5, -0.9, -1.5]),
                         behaviour_logprobs=torch.full((4,), -1.0))
    batch = dataclasses.replace(batch, tokens=tokens)
    base = grpo(batch, GRPOConfig()).step_advantages
    assert base[0] > 0 > base[2]
    plain = get_estimator("rlsd")(batch, RLSDConfig(lam=0.0))
    torch.testing.assert_close(plain.token_advantages, base[tokens.token_step])
    result = get_estimator("rlsd")(batch)
    torch.testing.assert_close(result.step_advantages, base)
    torch.testing.assert_close(result.token_advantages, rlsd_token_advantages(
        base, tokens.token_step, tokens.teacher_logprobs, tokens.behaviour_logprobs,
        RLSDConfig()))
    assert get_estimator("rlsd").needs == frozenset({"teacher"})


def test_rlsd_refuses_a_batch_without_behaviour_log_probs():
    batch = CreditBatch.from_lists([[1.0], [0.0]], [0, 0])
    tokens = TokenScores(token_step=torch.tensor([0, 1]), teacher_logprobs=torch.zeros(2))
    with pytest.raises(ValueError, match="ℓ\\^b"):
        get_estimator("rlsd")(dataclasses.replace(batch, tokens=tokens))
