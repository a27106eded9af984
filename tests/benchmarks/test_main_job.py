"""The main-job benchmark reads the pool and held-out success, start and final, and the phase
times from a run's metrics.jsonl, and the peak RSS from /usr/bin/time's report (the job itself
takes many minutes and is not run)."""

from __future__ import annotations

import json
import subprocess

import pytest

from bench_common import BenchmarkFailed
from main_job import (
    REPO,
    checkout,
    command,
    measure,
    peak_rss_mb,
    phase_seconds,
    reused_start,
    success_from_metrics,
)


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_pool_and_held_out_success_come_from_the_start_and_the_last_evaluation_with_them(
        tmp_path):
    """Pool: games 0 and 4 of 4 won (mean 0.5), at update 4 both 4 of 4 (1.0): gain 0.5, per
    game +1 and 0, whose bootstrap interval is 0 to 1 (two values each drawn with
    probability 1/2). Held-out (two splits of one game): 1 of 2 won, at update 4 (the last
    evaluation holding them; update 2 evaluated the pool alone) 2 of 2."""
    metrics = _write(tmp_path / "metrics.jsonl", [
        {"kind": "sft", "update": 0, "sft/seconds": 300.0},
        {"kind": "eval", "update": 0, "eval/success": 0.5, "eval/pool/won": "04",
         "eval/pool/episodes_per_game": 4.0, "eval/valid_seen/won": "1",
         "eval/valid_unseen/won": "0", "time/eval": 60.0},
        {"kind": "update", "update": 1, "rollout/success": 0.9, "time/rollout": 20.0,
         "time/update": 5.0},
        {"kind": "eval", "update": 2, "eval/pool/won": "11", "eval/pool/episodes_per_game": 4.0},
        {"kind": "eval", "update": 4, "eval/pool/won": "44", "eval/pool/episodes_per_game": 4.0,
         "eval/valid_seen/won": "1", "eval/valid_unseen/won": "1", "time/eval": 50.0},
    ])
    figures = success_from_metrics(metrics)
    assert figures["pool_games"] == 2 and figures["held_out_games"] == 2
    assert (figures["pool_success_start"], figures["pool_success_final"]) == (0.5, 1.0)
    assert figures["pool_success_gain"] == 0.5
    assert (figures["pool_success_gain_ci_low"], figures["pool_success_gain_ci_high"]) == (0, 1)
    assert (figures["pool_success_final_ci_low"], figures["pool_success_final_ci_high"]) == (1, 1)
    assert (figures["held_out_success_start"], figures["held_out_success_final"]) == (0.5, 1.0)
    assert (figures["final_update"], figures["evaluations"]) == (4, 3)
    assert phase_seconds(metrics) == {"sft_s": 300.0, "eval_s": 110.0, "updates_s": 25.0}


def test_a_run_without_a_pool_is_refused(tmp_path):
    metrics = _write(tmp_path / "metrics.jsonl",
                     [{"kind": "eval", "update": 0, "eval/valid_seen/won": "01"}])
    with pytest.raises(BenchmarkFailed, match="env.pool_games_per_type"):
        success_from_metrics(metrics)


def test_a_run_without_a_start_evaluation_is_refused(tmp_path):
    metrics = _write(tmp_path / "metrics.jsonl",
                     [{"kind": "eval", "update": 4, "eval/success": 0.375}])
    with pytest.raises(BenchmarkFailed, match="update 0"):
        success_from_metrics(metrics)


def test_a_failed_command_is_the_jobs_failure_not_a_usage_error(tmp_path):
    """``BenchmarkFailed``: run_script exits 1 with its message (a usage error would be 2)."""
    with pytest.raises(BenchmarkFailed, match="`exit 3` failed with exit status 3"):
        measure("exit 3", tmp_path, {"PATH": "/usr/bin:/bin"})


def test_peak_rss_is_read_from_gnu_time_in_megabytes():
    report = ("\tCommand being timed: \"bash -c make run\"\n"
              "\tMaximum resident set size (kbytes): 524288\n\tExit status: 0\n")
    assert peak_rss_mb(report) == 512.0
    assert peak_rss_mb("Command terminated by signal 9\n") is None


def test_a_reused_environment_is_never_reinstalled():
    assert command(quick=False, reuse_venv=False) == "make run"
    assert command(quick=False, reuse_venv=True) == "make -o .venv/.agentcredit-installed run"
    assert command(quick=True, reuse_venv=True).startswith(
        "make -o .venv/.agentcredit-installed .venv/.agentcredit-installed && ")


def test_a_clone_is_recorded_by_the_commit_it_checked_out(tmp_path):
    used = checkout(None, tmp_path / "clone")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert used == f"git clone of {REPO} at {head}"
    assert (tmp_path / "clone" / "pyproject.toml").is_file()


def test_a_run_reused_its_start_only_when_its_sft_line_says_so(tmp_path):
    trained = _write(tmp_path / "trained.jsonl", [{"kind": "sft", "update": 0,
                                                   "sft/seconds": 300.0}])
    reused = _write(tmp_path / "reused.jsonl", [{"kind": "sft", "update": 0, "sft/seconds": 0.4,
                                                 "sft/reused": 1.0}])
    assert not reused_start(trained) and reused_start(reused)
