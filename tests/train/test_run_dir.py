"""Resume survives what a kill leaves: torn logs, damaged checkpoints, logs behind a checkpoint."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from agentcredit.train.config import load_config
from agentcredit.train.loop import train
from agentcredit.train.run_dir import CHECKPOINT_STATE, RunDirectory, RunDirectoryError

from .fake_cli import cli_command

RUN = ("run.updates=4", "run.checkpoint_every=1", "run.keep_checkpoints=3", "run.eval_every=2",
       "credit.estimator=vict")


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _without_timings(records: list[dict]) -> list[dict]:
    timing = ("time/", "tokens/", "sft/seconds")
    return [{k: v for k, v in r.items() if not k.startswith(timing) and not k.endswith("_ms")}
            for r in records]


@pytest.fixture(scope="module")
def full(tmp_path_factory, tiny_fake_run):
    """An uninterrupted 4-update VICT run on the fake environment."""
    root = tmp_path_factory.mktemp("full")
    config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={root}", "run.name=full"])
    train(config, echo=lambda _: None)
    return config.run_dir


def _stopped(tmp_path: Path, tiny_fake_run, name: str, after: int):
    config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={tmp_path}",
                                f"run.name={name}"])
    train(config, stop_after_update=after, echo=lambda _: None)
    return config


def _resume(config) -> list[str]:
    said = []
    train(config, resume=True, echo=said.append)
    return said


def test_a_torn_last_line_in_either_log_is_cut_and_the_run_matches(full, tmp_path, tiny_fake_run):
    config = _stopped(tmp_path, tiny_fake_run, "torn", after=2)
    for log in ("metrics.jsonl", "ledger.jsonl"):
        with (config.run_dir / log).open("a") as f:
            f.write('{"kind": "update", "upda')  # a kill in the middle of a write
    said = _resume(config)
    assert "metrics.jsonl: cut a torn last line" in said
    assert "ledger.jsonl: cut a torn last line" in said
    assert _without_timings(_records(config.run_dir)) == _without_timings(_records(full))
    assert (config.run_dir / "ledger.jsonl").read_text() == (full / "ledger.jsonl").read_text()


def test_a_damaged_checkpoint_falls_back_to_the_one_before(full, tmp_path, tiny_fake_run):
    config = _stopped(tmp_path, tiny_fake_run, "damaged", after=3)
    state = config.run_dir / "checkpoints" / "update_00003" / CHECKPOINT_STATE
    state.write_bytes(state.read_bytes()[:100])  # truncated on disk
    said = _resume(config)
    assert any(line.startswith("checkpoint update_00003 is unusable: cannot read") for line in said)
    assert "resuming after update 2" in " ".join(said)
    assert _without_timings(_records(config.run_dir)) == _without_timings(_records(full))


def test_a_checkpoint_newer_than_the_logs_falls_back(full, tmp_path, tiny_fake_run):
    config = _stopped(tmp_path, tiny_fake_run, "behind", after=3)
    metrics = config.run_dir / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(lines[:-1]))  # the update-3 line never reached the disk
    said = _resume(config)
    assert any("update_00003 is unusable: metrics.jsonl ended before it" in line
               for line in said)
    assert _without_timings(_records(config.run_dir)) == _without_timings(_records(full))


def test_a_run_killed_before_its_first_checkpoint_restarts_from_reference(full, tmp_path,
                                                                           tiny_fake_run):
    config = _stopped(tmp_path, tiny_fake_run, "early", after=1)
    for checkpoint in (config.run_dir / "checkpoints").iterdir():
        for path in sorted(checkpoint.rglob("*"), reverse=True):
            path.unlink() if path.is_file() else path.rmdir()
        checkpoint.rmdir()
    said = _resume(config)
    assert any("restarting RL from reference/" in line for line in said)
    assert _without_timings(_records(config.run_dir)) == _without_timings(_records(full))


def test_nothing_to_resume_says_so(tmp_path, tiny_fake_run):
    config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={tmp_path}",
                                "run.name=empty"])
    config.run_dir.mkdir(parents=True)
    with pytest.raises(RunDirectoryError, match="nothing to resume"):
        train(config, resume=True, echo=lambda _: None)


def test_a_checkpoint_records_how_long_each_log_was(full):
    state = torch.load(RunDirectory(full).latest_checkpoint() / CHECKPOINT_STATE,
                       weights_only=False)
    lines = len((full / "metrics.jsonl").read_text().splitlines())
    assert state["log_lines"]["metrics.jsonl"] == lines
    assert state["log_lines"]["ledger.jsonl"] == len(
        (full / "ledger.jsonl").read_text().splitlines())


# A real process, killed with SIGKILL at random moments of its RL phase, resumed each time.


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_matches_the_uninterrupted_run(
        full, tmp_path, tiny_fake_run):
    args = ["train", *tiny_fake_run, *RUN, f"run.output_dir={tmp_path}", "run.name=killed"]
    run_dir = tmp_path / "killed"
    rng = random.Random(7)
    kills = 0
    for attempt in range(4):
        command = (cli_command("train", "--resume", str(run_dir))
                   if attempt else cli_command(*args))
        out = tmp_path / f"out{attempt}.txt"
        with out.open("w") as sink:
            child = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
            # kill only once this process is in its RL phase (evaluating or updating)
            while child.poll() is None and not any(
                    mark in out.read_text() for mark in ("eval after update", "resuming after")):
                time.sleep(0.05)
            time.sleep(rng.uniform(0.1, 2.0))
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
                child.wait()
                kills += 1
            else:
                assert child.returncode == 0, out.read_text()[-2000:]
    if kills == 4:  # the last attempt was killed too: finish the run
        done = subprocess.run(cli_command("train", "--resume", str(run_dir)),
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    assert kills >= 2
    assert _without_timings(_records(run_dir)) == _without_timings(_records(full))
    assert (run_dir / "ledger.jsonl").read_text() == (full / "ledger.jsonl").read_text()
