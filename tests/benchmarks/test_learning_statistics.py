"""The learning benchmark's gain statistics: the bootstrap interval worked by hand, per-game
outcomes read from eval lines, and the per-method figures."""

from __future__ import annotations

import pytest

import bench_common
from agentcredit.train.outcomes import bootstrap_mean_interval
from learning_alfworld import gain_statistics, per_game_won


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
