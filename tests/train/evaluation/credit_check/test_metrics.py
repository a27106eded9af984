"""The credit check's metrics on hand-built corridor groups whose truth is known by construction.

The corridor (``tests/corridor.py``, ``conftest.FakeEnv``): walk to the apple's room and take
it. Walking is free within the budget, so the one action that decides a rollout's outcome is
``take apple``: its true value is 1, every move's 0.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from agentcredit.credit import CreditBatch, get_estimator
from agentcredit.train.evaluation.credit_check.metrics import (
    RANDOM_ROW,
    StepLayout,
    TruthValues,
    accuracy_table,
    format_table,
    spearman,
    within_rollout_rhos,
)


def corridor_groups(num_groups: int, group_size: int = 8, seed: int = 0):
    """Rollouts of random walks in a 5-room corridor; a walker that reaches the apple takes it
    with probability 1/2 there. Returns (actions per rollout, group id per rollout, truth per
    rollout: 1 on ``take apple``, 0 on every move)."""
    rng = random.Random(seed)
    actions, groups, truths = [], [], []
    for g in range(num_groups):
        apple, start = rng.randrange(5), rng.randrange(5)
        for _ in range(group_size):
            room, steps = start, []
            for _ in range(rng.randint(3, 12)):
                if room == apple and rng.random() < 0.5:
                    steps.append("take apple")
                    break
                move = rng.choice([m for m, ok in (("go left", room > 0), ("go right", room < 4))
                                   if ok])
                room += 1 if move == "go right" else -1
                steps.append(move)
            actions.append(steps)
            groups.append(g)
            truths.append([1.0 if a == "take apple" else 0.0 for a in steps])
    return actions, groups, truths


def _batch(actions, groups) -> CreditBatch:
    rewards = [[0.0] * (len(a) - 1) + [10.0 * (a[-1] == "take apple")] for a in actions]
    return CreditBatch.from_lists(rewards, groups)


@pytest.fixture(scope="module")
def corridor():
    actions, groups, truths = corridor_groups(40)
    batch = _batch(actions, groups)
    layout = StepLayout.from_lists(groups, [len(a) for a in actions],
                                   batch.returns.tolist())
    truth = np.array([v for t in truths for v in t])
    return batch, layout, truth


def test_spearman_averages_tied_ranks():
    # ranks [1, 2.5, 2.5, 4] against [1, 2, 3, 4]: r = 4.5 / sqrt(4.5 · 5)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / np.sqrt(22.5))
    assert spearman([5, 5, 5], [1, 2, 3]) == 0.0


def test_within_rollout_counts_constant_methods_as_zero_and_skips_short_rollouts():
    step_rollout = np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3])
    advantages = np.array([3, 2, 1, 7, 7, 7, 1, 2, 1, 2, 3.0])
    truth = np.array([1, 2, 3, 1, 2, 3, 1, 2, 4, 4, 4.0])
    rhos = within_rollout_rhos(advantages, truth, step_rollout)
    # reversed order: -1; constant method: 0; two steps and a constant truth: left out
    assert rhos[:2].tolist() == [-1.0, 0.0]
    assert np.isnan(rhos[2]) and np.isnan(rhos[3])


def test_all_credit_on_the_action_that_matters_scores_one(corridor):
    _, layout, truth = corridor
    table = accuracy_table({"oracle": truth.copy()}, {"solver": TruthValues(truth, 0.5)},
                           layout, boots=50)
    for metric in ("pooled", "pooled_signal", "within", "sign", "sign_balanced"):
        assert table.value("oracle", "solver", metric) == pytest.approx(1.0)


def test_constant_in_rollout_scores_zero_within_rollouts(corridor):
    batch, layout, truth = corridor
    grpo = get_estimator("grpo")(batch).step_advantages.numpy()
    table = accuracy_table({"grpo": grpo}, {"solver": TruthValues(truth, 0.5)}, layout, boots=50)
    assert table.value("grpo", "solver", "within") == 0.0
    # pooled, GRPO still ranks winners' steps (where every take lies) above losers'
    assert table.value("grpo", "solver", "pooled") > 0.2


def test_random_row_is_near_zero_and_its_interval_covers_zero(corridor):
    _, layout, truth = corridor
    table = accuracy_table({}, {"solver": TruthValues(truth, 0.5)}, layout, boots=200)
    assert abs(table.value(RANDOM_ROW, "solver", "pooled")) < 0.1
    row = next(r for r in table.rows if r["method"] == RANDOM_ROW and r["metric"] == "pooled")
    assert row["low"] < 0 < row["high"]


def test_a_swapped_sign_is_caught(corridor):
    _, layout, truth = corridor
    table = accuracy_table({"swapped": -truth}, {"solver": TruthValues(truth, 0.5)}, layout,
                           boots=50)
    assert table.value("swapped", "solver", "pooled") == pytest.approx(-1.0)
    assert table.value("swapped", "solver", "within") == pytest.approx(-1.0)
    assert table.value("swapped", "solver", "sign") == 0.0


def test_sign_agreement_plain_and_class_balanced():
    layout = StepLayout.from_lists([0, 1], [3, 3], [0.0, 1.0])
    truth = TruthValues(np.array([1, 1, 1, -1, 0.1, -0.1]), 0.5)
    advantages = np.array([1, 1, -1, -1, -5, 5.0])
    table = accuracy_table({"m": advantages}, {"t": truth}, layout, boots=20)
    # clear steps: the first four; 3 of 4 agree; classes: 2/3 positive, 1/1 negative
    assert table.value("m", "t", "sign") == pytest.approx(0.75)
    assert table.value("m", "t", "sign_balanced") == pytest.approx((2 / 3 + 1) / 2)
    # a zero advantage agrees with no sign
    silent = accuracy_table({"zero": np.zeros(6)}, {"t": truth}, layout, boots=20)
    assert silent.value("zero", "t", "sign") == 0.0


def test_pooled_signal_drops_groups_with_equal_returns():
    # group 0 has equal returns and anti-correlated credit; group 1 has signal and agrees
    layout = StepLayout.from_lists([0, 0, 1, 1], [2, 2, 2, 2], [1.0, 1.0, 0.0, 1.0])
    truth = TruthValues(np.array([1, 2, 3, 4, 1, 2, 3, 4.0]), 0.5)
    advantages = np.array([4, 3, 2, 1, 1, 2, 3, 4.0])
    table = accuracy_table({"m": advantages}, {"t": truth}, layout, boots=20)
    assert table.value("m", "t", "pooled_signal") == pytest.approx(1.0)
    assert table.value("m", "t", "pooled") == pytest.approx(0.0)


def test_paired_differences_share_draws(corridor):
    _, layout, truth = corridor
    noisy = truth + np.random.default_rng(1).standard_normal(truth.size)
    table = accuracy_table({"oracle": truth, "noisy": noisy},
                           {"solver": TruthValues(truth, 0.5)}, layout,
                           pairs=[("oracle", "noisy"), ("noisy", "noisy")], boots=200)
    better = table.pair("oracle", "noisy", "solver", "pooled")
    assert better["diff"] > 0 and better["low"] > 0
    same = table.pair("noisy", "noisy", "solver", "pooled")
    assert same["diff"] == 0 and same["low"] == 0 and same["high"] == 0
    assert "oracle - noisy" in format_table(table)


def test_unknown_truth_steps_and_groups_are_left_out(corridor):
    _, layout, truth = corridor
    partial = np.where(layout.step_group < 10, truth, np.nan)
    table = accuracy_table({"oracle": truth}, {"mc": TruthValues(partial, 0.25)}, layout,
                           boots=20)
    assert table.truths["mc"]["groups"] == 10
    assert table.truths["mc"]["steps"] == int((layout.step_group < 10).sum())
    assert table.value("oracle", "mc", "pooled") == pytest.approx(1.0)


def test_misaligned_inputs_are_refused(corridor):
    _, layout, truth = corridor
    with pytest.raises(ValueError, match="advantages but the batch has"):
        accuracy_table({"m": truth[:-1]}, {"t": TruthValues(truth, 0.5)}, layout)
    with pytest.raises(ValueError, match="no advantages for 'absent'"):
        accuracy_table({"m": truth}, {"t": TruthValues(truth, 0.5)}, layout,
                       pairs=[("m", "absent")])


def test_sign_agreement_at_the_corrected_steps_sets_the_correction_against_the_base():
    # three groups of one rollout; θ = 0.25. Counted: steps with a truth, correction ≠ 0 and
    # |g| ≥ θ: step 0 (corr + g +: agrees; base −), step 1 (corr + g −; base − agrees),
    # step 4 (corr − g −: agrees; base 0 agrees with nothing), step 6 (corr + g +; base −).
    # Left out: step 2 (|g| = 0.1 < θ), step 3 (no correction), step 5 (no truth).
    layout = StepLayout.from_lists([0, 1, 2], [3, 2, 2], [1.0, 0.0, 1.0])
    truth = TruthValues(np.array([0.5, -0.5, 0.1, 1.0, -1.0, np.nan, 0.8]), 0.25)
    correction = np.array([0.2, 0.3, 0.4, 0.0, -0.2, 0.5, 0.1])
    base = np.array([-1.0, -1.0, 1.0, 1.0, 0.0, -2.0, -2.0])
    table = accuracy_table({"vict": base + correction}, {"mc": truth}, layout,
                           corrections={"vict": (correction, base)}, boots=200,
                           random_row=False)
    (row,) = table.corrected
    assert (row["method"], row["truth"], row["steps"]) == ("vict", "mc", 4)
    assert row["correction"] == pytest.approx(0.75) and row["base"] == pytest.approx(0.25)
    assert row["diff"] == pytest.approx(0.5)
    # per group (counted, correction agrees, base agrees): (2, 1, 1), (1, 1, 0), (1, 1, 0), so
    # a draw's paired difference is (c1 + c2) / (2 c0 + c1 + c2) with c_g the draws of group
    # g: between 0 (only group 0 drawn) and 1
    assert 0.0 <= row["low"] <= 0.5 <= row["high"] <= 1.0
    assert row["correction_low"] <= 0.75 <= row["correction_high"]
    assert table.to_dict()["corrected"] == [row]


def test_corrected_sign_agreement_needs_one_correction_and_base_per_step():
    layout = StepLayout.from_lists([0], [2], [1.0])
    with pytest.raises(ValueError, match="'vict': its correction and base have shapes"):
        accuracy_table({"vict": np.zeros(2)}, {"mc": TruthValues(np.ones(2), 0.25)}, layout,
                       corrections={"vict": (np.zeros(3), np.zeros(2))})
