"""The shared BM25 top-k (``envs.ranking``): best first, positive scores only, ties by index."""

import numpy as np

from agentcredit.envs.ranking import top_k_positive

SCORES = np.array([0.0, 2.0, 1.0, 2.0, 1.0, 3.0, -1.0])


def test_top_k_returns_the_highest_positive_scores_best_first_with_ties_by_index():
    assert top_k_positive(SCORES, 3) == [5, 1, 3]  # 3.0, then the two 2.0s in index order


def test_a_tie_at_the_kth_place_goes_to_the_lower_index():
    assert top_k_positive(SCORES, 4) == [5, 1, 3, 2]  # 2 and 4 tie at 1.0: 2 wins
    # six documents tie at 2.0 (odd indices) for three places: the three lowest win
    assert top_k_positive(np.array([1.0, 2.0] * 6), 3) == [1, 3, 5]


def test_only_positive_scores_are_returned_and_k_below_one_returns_nothing():
    assert top_k_positive(SCORES, 10) == [5, 1, 3, 2, 4]
    assert top_k_positive(SCORES, 0) == []
