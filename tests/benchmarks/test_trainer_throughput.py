"""The trainer throughput figures from one worker's timings."""

from __future__ import annotations

import pytest

from trainer_throughput import summarise


def _result() -> dict:
    record = {"kind": "update", "rollout/steps": 60.0, "rollout/episode_length": 7.5,
              "time/rollout": 10.0, "time/score": 1.0, "time/credit": 0.5, "time/update": 8.5}
    return {
        "updates": [{"record": record, "cpu_s": 36.0, "wall_s": 20.0}] * 2,
        "totals": {"seconds": {"generate": 12.0, "prefill": 4.0, "decode": 6.0,
                               "scoring": 2.0, "ppo_forward_backward": 10.0,
                               "optimiser_step": 2.0},
                   "tokens": {"generate": 800, "prefill": 4000, "decode": 900, "scoring": 0,
                              "ppo_forward_backward": 20000, "optimiser_step": 0}},
        "floors": {"prefill": 2.0, "decode": 2.0, "scoring": 1.0,
                   "ppo_forward_backward": 5.0, "optimiser_step": 2.0},
    }


def test_generation_is_sampling_less_prefill_beside_the_decode_floor_per_update():
    figures = summarise(_result())
    assert figures["prefill_s"] == 2.0 and figures["generation_s"] == 4.0
    assert figures["generation_floor_s"] == 1.0 and figures["generation_over_floor"] == 4.0
    assert figures["generation_tokens_per_s"] == pytest.approx(800 / 8.0)
    assert figures["rollout_other_s"] == 4.0  # rollout phase less sampling
    assert figures["ppo_forward_backward_over_floor"] == 2.0


def test_outcomes_are_finished_rollouts_per_hour_of_process_cpu_and_of_update_wall_time():
    figures = summarise(_result())
    assert figures["rollouts_per_update"] == 8
    assert figures["outcomes_per_cpu_hour"] == pytest.approx(3600 * 16 / 72.0)
    assert figures["outcomes_per_hour"] == pytest.approx(3600 * 16 / 40.0)
    assert figures["update_s"] == 20.0


def test_tokens_computed_are_counted_per_update_and_the_sft_epoch_is_carried():
    result = {**_result(), "sft_epoch_s": 12.5}
    figures = summarise(result)
    assert figures["ppo_tokens_per_update"] == 10000 and figures["scoring_tokens_per_update"] == 0
    assert figures["sft_epoch_s"] == 12.5
    assert "sft_epoch_s" not in summarise(_result())


def test_the_share_of_rows_the_hindsight_pass_scored_is_the_median_over_updates():
    result = _result()
    result["updates"] = [{**row, "record": {**row["record"], "score/hindsight_row_share": share}}
                         for row, share in zip(result["updates"], (0.25, 0.75), strict=True)]
    assert summarise(result)["hindsight_row_share"] == 0.5
    assert "hindsight_row_share" not in summarise(_result())
