"""The learning benchmark's statistics, worked by hand: each game's AUC, the per-method figures,
the paired differences, a run's record from its eval lines, and one start evaluation per
seed."""

from __future__ import annotations

import time

import pytest

import bench_common
from agentcredit.train.evaluation.outcomes import bootstrap_mean_interval
from learning_alfworld import (
    method_statistics,
    paired_statistics,
    per_game_auc,
    result_metrics,
    run_record,
)


def test_each_games_auc_weighs_its_trapezoids_by_the_updates_between_evaluations():
    """Evaluations at updates 0, 1 and 4. Game 0: (1 * (0 + 1) / 2 + 3 * (1 + 1) / 2) / 4 =
    0.875; game 1: (1 * (0.5 + 0.5) / 2 + 3 * (0.5 + 1) / 2) / 4 = 0.6875."""
    curve = [(0, [0.0, 0.5]), (1, [1.0, 0.5]), (4, [1.0, 1.0])]
    assert per_game_auc(curve) == [87.5, 68.75]
    assert per_game_auc([(0, [0.25])]) == [25.0]


def _run(method, seed, start, final, auc, held_start=(0.0,), held_final=(0.0,)):
    return {"method": method, "seed": seed, "pool_start": list(start),
            "pool_final": list(final), "pool_auc": list(auc),
            "held_out_start": list(held_start), "held_out_final": list(held_final)}


def test_method_statistics_by_hand():
    """Seed 0 gains +1 and 0 on its two pool games, seed 1 0 and -0.5: mean gain 0.5 / 4; the
    worst seed -0.25. Held-out: seed 0 wins one more game of three, seed 1 none: 1/6."""
    runs = [_run("grpo", 0, [0, 0.5], [1, 0.5], [50, 100], [1, 0, 0], [1, 1, 0]),
            _run("grpo", 1, [0, 0.5], [0, 0], [0, 50], [0, 0, 0], [0, 0, 0]),
            _run("gigpo", 0, [0, 0], [1, 1], [100, 100])]  # another method: ignored
    stats = method_statistics(runs, "grpo")
    assert stats["success_start_mean.grpo"] == 0.25
    assert stats["success_final_mean.grpo"] == 0.375
    assert stats["success_gain_mean.grpo"] == 0.125
    assert stats["success_gain_min.grpo"] == -0.25
    assert stats["success_auc_mean.grpo"] == 50
    assert stats["held_out_gain_mean.grpo"] == pytest.approx(1 / 6)
    assert stats["held_out_start_mean.grpo"] == pytest.approx(1 / 6)
    assert stats["held_out_final_mean.grpo"] == pytest.approx(2 / 6)
    assert (stats["success_gain_ci_low.grpo"], stats["success_gain_ci_high.grpo"]) == (
        bootstrap_mean_interval([[1, 0], [0, -0.5]]))
    assert stats["success_gain_ci_low.grpo"] < 0 < stats["success_gain_ci_high.grpo"]
    # every seed the same AUC on every game: a zero-width interval
    flat = method_statistics([_run("m", s, [0], [0], [40]) for s in (0, 1)], "m")
    assert (flat["success_auc_ci_low.m"], flat["success_auc_ci_high.m"]) == (40, 40)


def test_a_paired_difference_compares_the_same_game_under_the_same_seed():
    """Seed 0: A's finals 1, 1 against B's 1, 0.5 (differences 0, 0.5); seed 1: 0.5, 0 against
    0, 0 (0.5, 0): mean 0.25, which is also A's mean gain minus B's. Seed 2 has A only."""
    runs = [_run("vict/grpo", 0, [0, 0.5], [1, 1], [60, 80]),
            _run("grpo", 0, [0, 0.5], [1, 0.5], [50, 80]),
            _run("vict/grpo", 1, [0, 0], [0.5, 0], [30, 0]),
            _run("grpo", 1, [0, 0], [0, 0], [10, 0]),
            _run("vict/grpo", 2, [0, 0], [1, 1], [100, 100])]
    stats = paired_statistics(runs, "vict/grpo", "grpo")
    assert stats["paired_gain_diff_mean.vict/grpo-grpo"] == 0.25
    gains = {m: method_statistics([r for r in runs if r["seed"] < 2], m)[
        f"success_gain_mean.{m}"] for m in ("vict/grpo", "grpo")}
    assert stats["paired_gain_diff_mean.vict/grpo-grpo"] == gains["vict/grpo"] - gains["grpo"]
    assert stats["paired_auc_diff_mean.vict/grpo-grpo"] == (10 + 0 + 20 + 0) / 4
    assert (stats["paired_gain_diff_ci_low.vict/grpo-grpo"],
            stats["paired_gain_diff_ci_high.vict/grpo-grpo"]) == (
        bootstrap_mean_interval([[0, 0.5], [0.5, 0]]))


def test_a_pair_without_a_shared_seed_or_start_is_refused():
    with pytest.raises(ValueError, match="share no seed"):
        paired_statistics([_run("a", 0, [0], [1], [0]), _run("b", 1, [0], [1], [0])], "a", "b")
    with pytest.raises(ValueError, match="not paired"):
        paired_statistics([_run("a", 0, [0], [1], [0]), _run("b", 0, [1], [1], [0])], "a", "b")


def test_a_run_record_reads_the_pool_at_every_evaluation_and_the_held_out_at_the_ends():
    """The pool: games 0 and 4 of 4 won, then 2 and 2, then 4 and 4 at updates 0, 2, 4: AUC
    (2 * (0 + 0.5) / 2 + 2 * (0.5 + 1) / 2) / 4 = 0.5 and (2 * 1.5 / 2 + 2 * 1.5 / 2) / 4 =
    0.75. The held-out game: won at the start, lost at update 4 (update 2 skipped it)."""
    def line(update, pool, seen=None):
        record = {"kind": "eval", "update": update, "eval/pool/won": pool,
                  "eval/pool/episodes_per_game": 4.0,
                  "eval/pool/success": sum(map(int, pool)) / 8}
        if seen is not None:
            record.update({"eval/valid_seen/won": seen, "eval/valid_seen/episodes_per_game": 1.0,
                           "eval/valid_seen/success": float(seen)})
        return record

    updates = [{"kind": "update", "update": 1, "time/rollout": 2.0, "credit/x": 1.0},
               {"kind": "update", "update": 2, "time/rollout": 4.0, "credit/x": 0.0}]
    record = run_record("vict/gigpo", 3, [line(0, "04", "1"), line(2, "22"), line(4, "44", "0")],
                        updates)
    assert (record["backbone"], record["seed"]) == ("gigpo", 3)
    assert record["pool_start"] == [0, 1] and record["pool_final"] == [1, 1]
    assert record["pool_auc"] == [50, 75]
    assert record["held_out_start"] == [1] and record["held_out_final"] == [0]
    assert record["curve"][1] == {"update": 2, "success_pool": 0.5}
    assert record["diagnostics"] == {"credit/x": 0.5, "time/rollout": 3.0}


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


def test_the_result_metrics_are_rounded_to_four_places_with_the_counts_and_the_wall_time():
    """Two seeds, 3 pool games and 2 held-out games a run; begun 2 s ago."""
    runs = [_run("grpo", 0, (0.0, 1.0, 0.5), (1.0, 1.0, 0.5), (0.0, 0.0, 0.0),
                 held_start=(0.0, 1.0), held_final=(1.0, 1.0))]
    out = result_metrics({"success_gain_mean.grpo": 0.123456}, runs, [0, 1],
                         time.perf_counter() - 2.0)
    assert out["success_gain_mean.grpo"] == 0.1235
    assert (out["seeds"], out["pool_games"], out["held_out_games"]) == (2, 3, 2)
    assert 2.0 <= out["wall_s"] < 10.0
