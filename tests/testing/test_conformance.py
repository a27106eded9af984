"""The conformance suite passes every built-in estimator and catches, by name, a copy of GRPO
broken in each of the ways public reports describe."""

from __future__ import annotations

import pytest
import torch

from agentcredit.credit import CreditResult, estimator_names
from agentcredit.credit.grpo import GRPOConfig, group_relative, grpo
from agentcredit.credit.registry import (
    CLAIMS,
    WAIVABLE,
    Estimator,
    get_estimator,
    register_estimator,
)
from agentcredit.testing import assert_conforms, check_estimator, turn_gradients
from agentcredit.testing.cases import sign_cases
from agentcredit.testing.conformance import CHECKS_BY_CLAIM, GENERAL_CHECKS

ALL_CLAIMS = frozenset(CLAIMS)


@pytest.mark.parametrize("name", estimator_names())
def test_every_built_in_estimator_passes_the_checks_it_claims(name):  # 2-4 s each
    assert_conforms(name)


def test_the_claimed_checks_are_exactly_the_registry_claims():
    assert set(CHECKS_BY_CLAIM) == ALL_CLAIMS and not set(GENERAL_CHECKS) & ALL_CLAIMS


def test_only_the_random_edges_control_waives_a_check_and_it_says_why():
    waived = {name: get_estimator(name).waives for name in estimator_names()
              if get_estimator(name).waives}
    assert set(waived) == {"random_edges"} and "random credit" in waived["random_edges"]["sign"]
    assert set(WAIVABLE) <= set(GENERAL_CHECKS)


@pytest.mark.parametrize("waives, message", [
    ({"finite_and_shaped": "too strict"}, "waives 'finite_and_shaped', which no estimator may"),
    ({"sign": " "}, "waives 'sign' without a reason"),
])
def test_register_estimator_refuses_a_waiver_it_cannot_grant(waives, message):
    with pytest.raises(ValueError, match=message):
        register_estimator("waives_too_much", GRPOConfig, waives=waives)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_sign_case_group_holds_twins_that_differ_in_their_return_alone(seed):
    for case in sign_cases(seed):
        returns = case.returns()
        for group in {r.group for r in case.rollouts}:
            rows = [i for i, r in enumerate(case.rollouts) if r.group == group]
            twins = [(i, j) for i in rows for j in rows if i < j
                     and case.rollouts[i].same_steps(case.rollouts[j])]
            assert twins and all(returns[i] != returns[j] for i, j in twins)
            # rows of a group share a length; only twins share their steps
            assert len({case.rollouts[i].num_steps for i in rows}) == 1
            assert len(twins) == len(rows) // 2


def test_register_estimator_refuses_an_unknown_claim():
    with pytest.raises(ValueError, match=r"claims unknown properties \['unbiased'\]; choose"):
        register_estimator("claims_too_much", GRPOConfig, claims=("unbiased",))


def broken(fn) -> Estimator:
    """A copy of GRPO with ``fn`` as its function, claiming everything GRPO claims."""
    return Estimator(name=f"grpo_{fn.__name__}", fn=fn, config_cls=GRPOConfig,
                     claims=get_estimator("grpo").claims)


def failed_checks(fn) -> dict[str, str]:
    report = check_estimator(broken(fn))
    return {f.check: f.message for f in report.failures}


def rollout_advantage(batch, config) -> torch.Tensor:
    return group_relative(batch.returns, batch.group_index, batch.num_groups,
                          norm_by_std=config.norm_by_std, eps=config.eps)


def group_mean(values: torch.Tensor, group: torch.Tensor, num_groups: int) -> torch.Tensor:
    sums = torch.zeros(num_groups, dtype=values.dtype).index_add_(0, group, values)
    return sums / torch.bincount(group, minlength=num_groups)


def test_a_grpo_copy_that_divides_by_a_zero_std_fails_finite_and_shaped():
    def zero_std(batch, config):
        mean = group_mean(batch.returns, batch.group_index, batch.num_groups)
        centred = batch.returns - mean[batch.group_index]
        std = torch.zeros(batch.num_groups).index_add_(0, batch.group_index, centred ** 2).sqrt()
        return CreditResult(step_advantages=(centred / std[batch.group_index])[batch.step_rollout])

    assert "is not finite" in failed_checks(zero_std)["finite_and_shaped"]


def test_a_grpo_copy_that_returns_one_value_per_rollout_fails_finite_and_shaped():
    def per_rollout(batch, config):
        return CreditResult(step_advantages=rollout_advantage(batch, config))

    assert "return one value per step [S]" in failed_checks(per_rollout)["finite_and_shaped"]


def test_a_grpo_copy_that_credits_only_the_last_step_fails_step_credit():
    def last_step_only(batch, config):
        last = batch.step_index == batch.episode_lengths[batch.step_rollout] - 1
        return CreditResult(step_advantages=rollout_advantage(batch, config)[batch.step_rollout]
                            * last)

    message = failed_checks(last_step_only)["step_credit"]
    assert "got 0 at steps" in message and "claims step_credit" in message


def test_a_grpo_copy_with_a_batch_wide_baseline_fails_constant_group_zero():
    def batch_mean(batch, config):
        return CreditResult(step_advantages=(batch.returns - batch.returns.mean())[
            batch.step_rollout])

    assert "returns all equal" in failed_checks(batch_mean)["constant_group_zero"]


def test_a_grpo_copy_that_uses_the_next_rollout_as_baseline_fails_permutation():
    def next_rollout(batch, config):
        baseline = torch.roll(batch.returns, 1)
        return CreditResult(step_advantages=(batch.returns - baseline)[batch.step_rollout])

    assert "once the rollouts were reordered" in failed_checks(next_rollout)["permutation"]


def test_a_grpo_copy_that_weighs_rollouts_by_their_rows_fails_returns_only():
    def row_weighted(batch, config):
        # the group mean over step rows, each carrying its rollout's return
        per_row = batch.returns[batch.step_rollout]
        row_group = batch.group_index[batch.step_rollout]
        mean = group_mean(per_row, row_group, batch.num_groups)
        return CreditResult(step_advantages=per_row - mean[row_group])

    assert "whatever its row count" in failed_checks(row_weighted)["returns_only"]


def test_a_grpo_copy_with_a_per_turn_reward_baseline_fails_turn_baseline():
    def per_turn(batch, config):
        # each step's reward minus the mean reward of the same turn in its group
        key = batch.group_index[batch.step_rollout] * 1000 + batch.step_index
        keys, row_key = torch.unique(key, return_inverse=True)
        mean = group_mean(batch.step_rewards, row_key, len(keys))
        return CreditResult(step_advantages=batch.step_rewards - mean[row_key])

    message = failed_checks(per_turn)["turn_baseline"]
    assert "expected gradient of turn 0's decision is 0 against the true 0.18" in message


def test_a_grpo_copy_that_reads_the_teacher_without_declaring_it_fails_declared_inputs():
    def peeks(batch, config):
        out = grpo(batch, config)
        if batch.tokens is not None:
            bonus = torch.zeros(batch.num_steps).index_add_(0, batch.tokens.token_step,
                                                            batch.tokens.teacher_logprobs)
            out.step_advantages = out.step_advantages + 0.01 * bonus
        return out

    message = failed_checks(peeks)["declared_inputs"]
    assert "undeclared input 'teacher'" in message and "needs=('teacher',)" in message


def test_a_grpo_copy_with_its_sign_flipped_fails_the_sign_check_where_it_passed_all_else():
    def flipped(batch, config):
        out = grpo(batch, config)
        out.step_advantages = -out.step_advantages
        return out

    # the claims of the plug-in (docs/extending.md's recipe): the 6 other checks pass
    plug_in = Estimator("grpo_flipped", flipped, GRPOConfig,
                        claims=frozenset({"step_credit", "constant_group_zero", "permutation"}))
    report = check_estimator(plug_in)
    assert len(report.checks) == 7 and {f.check for f in report.failures} == {"sign"}
    assert "a higher return must not earn less credit" in report.failures[0].message
    assert report.lines()[3].startswith("FAIL sign [twins]: rollout")
    assert "sign" in failed_checks(flipped)  # with all of GRPO's claims too


def test_a_token_level_estimator_with_its_token_sign_flipped_fails_the_sign_check():
    adrs = get_estimator("adrs")

    def flipped_tokens(batch, config):
        out = adrs(batch, config)
        out.token_advantages = -out.token_advantages
        return out

    report = check_estimator(Estimator("adrs_flipped", flipped_tokens, adrs.config_cls,
                                       adrs.needs, adrs.claims))
    assert "sign" in {f.check for f in report.failures}


def test_a_grpo_copy_that_draws_from_the_global_generator_fails_deterministic():
    def noisy(batch, config):
        out = grpo(batch, config)
        out.step_advantages = out.step_advantages + 1e-3 * torch.rand(batch.num_steps)
        return out

    assert "on the same batch" in failed_checks(noisy)["deterministic"]


def test_the_stop_or_continue_gradient_is_worked_by_hand_and_rloo_is_unbiased_on_it():
    # q = (0.6, 0.5); lengths 1, 2, 3 have probabilities 0.4, 0.3, 0.3 and outcomes 0, 1, 0.5.
    # θ_0: length 2 scores 0.4 with R = 1, length 3 scores 0.4 with R = 0.5:
    #   0.3·0.4·1 + 0.3·0.4·0.5 = 0.18
    # θ_1: length 2 stops (−0.5, R = 1), length 3 continues (0.5, R = 0.5):
    #   0.3·(−0.5)·1 + 0.3·0.5·0.5 = −0.075
    rloo = get_estimator("rloo")
    true, estimated = turn_gradients(lambda case: rloo(case.batch(())))
    assert true == pytest.approx([0.18, -0.075])
    # the leave-one-out baseline is independent of the rollout's own decisions: exact
    assert estimated == pytest.approx(true)


def test_the_report_prints_one_line_per_check_and_each_failure():
    def last_step_only(batch, config):
        last = batch.step_index == batch.episode_lengths[batch.step_rollout] - 1
        return CreditResult(step_advantages=rollout_advantage(batch, config)[batch.step_rollout]
                            * last)

    lines = check_estimator(broken(last_step_only)).lines()
    assert "ok   finite_and_shaped" in lines
    assert any(line.startswith("FAIL step_credit [mixed]: rollout") for line in lines)
    with pytest.raises(AssertionError, match="'grpo_last_step_only' fails the conformance"):
        assert_conforms(broken(last_step_only))
