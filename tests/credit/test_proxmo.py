"""ProxMO (credit/proxmo.py) on hand-built groups: the success-rate-aware episode weight and the
proximity baseline, which with similarity 1 is the group mean. Expected values are worked out
in each test with plain arithmetic."""

from __future__ import annotations

import math

import pytest
import torch

from agentcredit.credit import CreditBatch
from agentcredit.credit.proxmo import (
    ProxMOConfig,
    cosine_similarity,
    proximity_weights,
    proxmo,
    success_rate_weight,
    tfidf_vectors,
)

EPS = 1e-6
BETA, ALPHA = 0.866, 5.0


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _weight(success: bool, p: float) -> float:
    f = _sigmoid((1 - p) ** ALPHA) - 0.5 if success else _sigmoid(-(p ** ALPHA)) - 0.5
    return 1.0 + BETA * f


def test_with_similarity_one_the_proximity_baseline_is_the_group_mean():
    values = torch.tensor([9.5, 10.0, 0.0, 0.0, 3.0], dtype=torch.float64)
    weights = proximity_weights(torch.ones(5, 5, dtype=torch.float64), temperature=0.1)
    assert (weights @ values).tolist() == pytest.approx([22.5 / 5] * 5)


def test_proxmo_on_identical_observations_subtracts_the_group_mean_return_to_go():
    # every step of the group saw the same text, so every pair has cosine similarity 1
    batch = CreditBatch.from_lists([[0, 10], [0, 0]], [0, 0],
                                   [["in the kitchen"] * 2, ["in the kitchen"] * 2],
                                   dtype=torch.float64)
    g = [0.95 * 10, 10.0, 0.0, 0.0]
    mean_g = sum(g) / 4
    p = 0.5  # one success in two
    episode = [_weight(True, p) * 5 / (5 + EPS), _weight(False, p) * -5 / (5 + EPS)]
    expected = [episode[0] + g[0] - mean_g, episode[0] + g[1] - mean_g,
                episode[1] + g[2] - mean_g, episode[1] + g[3] - mean_g]
    result = proxmo(batch, ProxMOConfig())
    assert result.step_advantages.tolist() == pytest.approx(expected, rel=1e-9)
    assert result.extras["proximity_baseline"].tolist() == pytest.approx([mean_g] * 4)


def test_rare_successes_are_amplified_and_common_failures_attenuated():
    # group 0: 1 success in 4 (p = 1/4); group 1: 3 successes in 4 (p = 3/4)
    success = torch.tensor([True, False, False, False, True, True, True, False])
    group = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    w = success_rate_weight(success, group, 2, alpha=ALPHA, beta=BETA).tolist()
    assert w[0] == pytest.approx(_weight(True, 0.25)) and w[0] > 1.05  # 1 + 0.866·(σ(0.237) − ½)
    assert w[7] == pytest.approx(_weight(False, 0.75)) and w[7] < 0.95
    assert w[1] == pytest.approx(_weight(False, 0.25)) and w[1] == pytest.approx(1.0, abs=0.001)
    assert w[4] == pytest.approx(_weight(True, 0.75)) and w[4] == pytest.approx(1.0, abs=0.001)


def test_an_observation_unlike_the_others_keeps_most_of_its_own_weight():
    rows, size = tfidf_vectors(["red door", "blue box", "blue box"])
    assert size == 4
    # "blue box" twice: identical rows; "red door" shares no word with them
    similarity = cosine_similarity(rows, size)
    assert similarity.flatten().tolist() == pytest.approx([1, 0, 0, 0, 1, 1, 0, 1, 1])
    weights = proximity_weights(similarity, temperature=0.1)
    own = math.exp(10) / (math.exp(10) + 2)  # softmax of (10, 0, 0)
    assert weights[0, 0].item() == pytest.approx(own)
    assert weights[1].tolist() == pytest.approx([1 / (1 + 2 * math.exp(10)),
                                                 math.exp(10) / (1 + 2 * math.exp(10)),
                                                 math.exp(10) / (1 + 2 * math.exp(10))])


def test_tfidf_weighs_words_by_smoothed_inverse_document_frequency():
    rows, _ = tfidf_vectors(["apple pie", "apple"])
    idf_apple = math.log(3 / 3) + 1  # in both documents: 1.0
    idf_pie = math.log(3 / 2) + 1
    norm = math.hypot(idf_apple, idf_pie)
    assert sorted(rows[0].values()) == pytest.approx(sorted([idf_apple / norm, idf_pie / norm]))
    assert list(rows[1].values()) == pytest.approx([1.0])


def test_proxmo_never_mixes_steps_of_different_groups():
    batch = CreditBatch.from_lists([[10], [0], [4], [4]], [0, 0, 1, 1],
                                   [["same"], ["same"], ["same"], ["same"]], dtype=torch.float64)
    baseline = proxmo(batch, ProxMOConfig()).extras["proximity_baseline"].tolist()
    assert baseline == pytest.approx([5.0, 5.0, 4.0, 4.0])
