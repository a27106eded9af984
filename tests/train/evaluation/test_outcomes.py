"""Success with its uncertainty: the bootstrap interval worked by hand, each game's share read
from an eval line, and the before/after lines a run prints."""

from __future__ import annotations

import pytest

from agentcredit.train.evaluation.outcomes import (
    bootstrap_mean_interval,
    game_shares,
    success_report,
)


def test_equal_gains_give_a_zero_width_interval_at_that_gain():
    low, high = bootstrap_mean_interval([[1, 1, 1], [1, 1, 1]])
    assert low == pytest.approx(1.0) and high == pytest.approx(1.0)


def test_two_games_won_and_lost_span_the_whole_range():
    # one seed, gains 0 and 1: a resample's mean is 0, 1/2 or 1 with probability 1/4, 1/2,
    # 1/4, so the 2.5 % quantile is 0 and the 97.5 % quantile is 1
    assert bootstrap_mean_interval([[0, 1]]) == (0.0, 1.0)


def test_one_gain_in_four_games_reaches_three_quarters_at_most():
    # gains 0, 0, 0, 1: the mean is k/4 with k ~ Binomial(4, 1/4): P(k <= 2) = 0.949 and
    # P(k <= 3) = 0.996, so the 97.5 % quantile is 3/4; P(k = 0) = 0.316 puts the 2.5 % at 0
    assert bootstrap_mean_interval([[0, 0, 0, 1]]) == (0.0, 0.75)


def test_seeds_are_resampled_too():
    # two seeds with one game each, gains 0 and 1: only seed resampling can move the mean
    assert bootstrap_mean_interval([[0], [1]]) == (0.0, 1.0)


def test_the_interval_is_fixed_by_its_seed_and_narrows_with_more_games():
    few = [[0, 1, 0, 1]]
    many = [[0, 1] * 50]
    assert bootstrap_mean_interval(few) == bootstrap_mean_interval(few)
    width = [high - low for low, high in map(bootstrap_mean_interval, (few, many))]
    assert width[1] < width[0]


def test_an_empty_table_is_refused():
    with pytest.raises(ValueError, match="seeds, games"):
        bootstrap_mean_interval([[]])


def test_each_games_share_uses_its_splits_episode_count():
    line = {"eval/pool/won": "042", "eval/pool/episodes_per_game": 4.0,
            "eval/valid_seen/won": "10", "eval/valid_seen/episodes_per_game": 1.0}
    assert game_shares(line, ["pool", "valid_seen"]) == [0.0, 1.0, 0.5, 1.0, 0.0]
    # a line of before per-split counts: the one count of the line
    assert game_shares({"eval/episodes_per_game": 2.0, "eval/v/won": "21"}, ["v"]) == [1, 0.5]


def _evaluation(update, pool, seen, unseen):
    return {"kind": "eval", "update": update, "eval/pool/won": pool,
            "eval/pool/episodes_per_game": 4.0, "eval/valid_seen/won": seen,
            "eval/valid_seen/episodes_per_game": 1.0, "eval/valid_unseen/won": unseen,
            "eval/valid_unseen/episodes_per_game": 1.0}


def test_a_run_reports_the_pool_and_the_held_out_games_apart_with_intervals_over_games():
    """Pool: two games, 0 and 4 of 4 won (50 %), then 4 and 4 (100 %): the change per game is
    +1 and 0, whose bootstrap interval spans 0 to 1 (test above). Held-out: one of two games won
    at both ends; two games won and lost span 0 % to 100 %."""
    lines = success_report([_evaluation(0, "04", "1", "0"), _evaluation(5, "22", "0", "0"),
                            _evaluation(10, "44", "0", "1")], sft=True)
    assert lines == [
        "pool: the 2 training games RL trains on, 4 episodes each:",
        "  before RL (after SFT): 50.0%  (95% interval over games: 0.0% to 100.0%)",
        "  after 10 updates:      100.0%  (95% interval over games: 100.0% to 100.0%)",
        "  change:                +50.0 points  (95% interval over games: +0.0 to +100.0)",
        "held-out: 2 new games RL never trains on (valid_seen, valid_unseen), 1 episode each:",
        "  before RL (after SFT): 50.0%  (95% interval over games: 0.0% to 100.0%)",
        "  after 10 updates:      50.0%  (95% interval over games: 0.0% to 100.0%)",
        "  change:                +0.0 points  (95% interval over games: -100.0 to +100.0)",
    ]


def test_a_run_without_a_start_evaluation_reports_its_last_one_only():
    lines = success_report([{"kind": "eval", "update": 3, "eval/valid/won": "1"}], sft=False)
    assert lines == ["held-out: 1 new game RL never trains on (valid), 1 episode each:",
                     "  after 3 updates: 100.0%  (95% interval over games: 100.0% to 100.0%)"]
