"""The main-job benchmark reads the start and final success from a run's metrics.jsonl and the
peak RSS from /usr/bin/time's report (the job itself takes many minutes and is not run)."""

from __future__ import annotations

import json
import subprocess

import pytest

from main_job import REPO, checkout, command, peak_rss_mb, success_from_metrics


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_start_and_final_success_come_from_the_first_and_last_evaluations(tmp_path):
    metrics = _write(tmp_path / "metrics.jsonl", [
        {"kind": "sft", "update": 0, "sft/final_loss": 0.4},
        {"kind": "eval", "update": 0, "eval/success": 0.125, "eval/valid_seen/won": "010"},
        {"kind": "update", "update": 1, "rollout/success": 0.9},
        {"kind": "eval", "update": 2, "eval/success": 0.25},
        {"kind": "update", "update": 3, "rollout/success": 0.8},
        {"kind": "eval", "update": 4, "eval/success": 0.375},
    ])
    assert success_from_metrics(metrics) == {"success_start": 0.125, "success_final": 0.375,
                                             "success_gain": 0.25, "final_update": 4,
                                             "evaluations": 3}


def test_a_run_without_a_start_evaluation_is_refused(tmp_path):
    metrics = _write(tmp_path / "metrics.jsonl",
                     [{"kind": "eval", "update": 4, "eval/success": 0.375}])
    with pytest.raises(SystemExit, match="update 0"):
        success_from_metrics(metrics)


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
