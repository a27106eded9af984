"""The learning benchmark's gain statistics: the bootstrap interval worked by hand, per-game
outcomes read from eval lines, and the per-method figures."""

from __future__ import annotations

import pytest

import bench_common
from bench_common import bootstrap_mean_interval
from learning_alfworld import gain_statistics, per_game_won


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


def test_per_game_outcomes_are_read_in_split_name_order():
    line = {"kind": "eval", "update": 4, "eval/success": 0.6,
            "eval/valid_unseen/won": "01", "eval/valid_seen/won": "110",
            "eval/valid_seen/success": 2 / 3}
    assert per_game_won(line) == [1, 1, 0, 0, 1]


def test_several_episodes_per_game_read_as_each_games_share_won():
    line = {"kind": "eval", "eval/episodes_per_game": 4.0, "eval/valid_unseen/won": "04",
            "eval/valid_seen/won": "13"}
    assert per_game_won(line) == [0.25, 0.75, 0.0, 1.0]


def test_an_eval_line_without_per_game_outcomes_stops_with_what_to_do():
    with pytest.raises(SystemExit, match="fresh --output-dir"):
        per_game_won({"kind": "eval", "update": 0, "eval/success": 0.5})


def test_gain_statistics_by_hand():
    runs = [  # seed 0 gains 1 game of 4, seed 1 loses 1 of 4; another method is ignored
        {"method": "grpo", "start_won": [0, 0, 1, 1], "final_won": [1, 0, 1, 1]},
        {"method": "grpo", "start_won": [0, 0, 1, 1], "final_won": [0, 0, 0, 1]},
        {"method": "gigpo", "start_won": [0, 0, 0, 0], "final_won": [1, 1, 1, 1]},
    ]
    stats = gain_statistics(runs, "grpo")
    assert stats["success_start_mean.grpo"] == 0.5
    assert stats["success_gain_mean.grpo"] == 0.0
    assert stats["success_gain_min.grpo"] == -0.25
    assert stats["success_gain_ci_low.grpo"] < 0 < stats["success_gain_ci_high.grpo"]
    assert (stats["success_gain_ci_low.grpo"], stats["success_gain_ci_high.grpo"]) == (
        bootstrap_mean_interval([[1, 0, 0, 0], [0, 0, -1, 0]]))


def test_the_start_is_evaluated_once_per_seed_and_evaluation_setting(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(bench_common, "evaluate_model",
                        lambda config, start, update: calls.append(config.run.seed) or
                        {"eval/success": 0.5 + config.run.seed})
    cache: dict = {}
    start = tmp_path / "start"

    def evaluation(method, seed):
        config = bench_common.method_config(start, method, [f"run.seed={seed}",
                                                            f"run.output_dir={tmp_path}"], "r")
        return bench_common.start_evaluation(start, config, cache)

    assert evaluation("grpo", 0) == {"kind": "eval", "update": 0, "eval/success": 0.5}
    evaluation("vict/gigpo", 0)  # same seed, same evaluation: shared
    assert evaluation("grpo", 1)["eval/success"] == 1.5
    evaluation("skill_grpo_star", 0)  # evaluated with skills: its own evaluation
    assert calls == [0, 1, 0]
