"""Resume survives what a kill leaves: torn logs, damaged checkpoints, logs behind a checkpoint."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from agentcredit.config import load_config
from agentcredit.disk_full import DiskFullError
from agentcredit.run.directory import RunDirectory, RunDirectoryError
from agentcredit.run.random_streams import RandomStreams
from agentcredit.run.trainer_state import CHECKPOINT_RECORD, CHECKPOINT_STATE
from agentcredit.train.loop import train
from agentcredit.train.model_loading import load_policy

from .conftest import RUN, _records, _resume, _stopped, _without_timings
from .fake_cli import cli_command


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
    state = json.loads((RunDirectory(full).latest_checkpoint() / CHECKPOINT_RECORD).read_text())
    lines = len((full / "metrics.jsonl").read_text().splitlines())
    assert state["log_lines"]["metrics.jsonl"] == lines
    assert state["log_lines"]["ledger.jsonl"] == len(
        (full / "ledger.jsonl").read_text().splitlines())


def test_truncated_weights_in_the_newest_checkpoint_fall_back_to_the_one_before(
        full, tmp_path, tiny_fake_run):
    config = _stopped(tmp_path, tiny_fake_run, "cut_weights", after=3)
    weights = config.run_dir / "checkpoints" / "update_00003" / "policy" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:weights.stat().st_size // 2])
    said = _resume(config)
    assert any(line.startswith("checkpoint update_00003 is unusable: its policy/"
                               "model.safetensors does not load") for line in said)
    assert "resuming after update 2" in " ".join(said)
    assert _without_timings(_records(config.run_dir)) == _without_timings(_records(full))


def test_a_log_symlinked_outside_the_run_is_never_repaired(tmp_path):
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text('{"kind": "sft"}\n{"kind": "upd')  # a torn-looking last line
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    run.metrics.symlink_to(outside)
    for start in (run.create, lambda: run.resume(print)):
        with pytest.raises(RunDirectoryError, match="metrics.jsonl is a symlink .*never opened "
                                                    "through links"):
            start()
    assert outside.read_text() == '{"kind": "sft"}\n{"kind": "upd'


def test_a_log_symlinked_to_the_other_log_of_the_run_is_refused_too(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    run.ledger.write_text('{"update": 1}\n{"upd')
    run.metrics.symlink_to(run.ledger)  # a cut of the metrics would cut the ledger
    with pytest.raises(RunDirectoryError, match="metrics.jsonl is a symlink"):
        run.resume(print)
    assert run.ledger.read_text() == '{"update": 1}\n{"upd'


def test_a_folder_left_by_a_start_that_failed_before_its_first_line_starts_again(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    run.metrics.touch()
    (run.path / "config.yaml").write_text("run: {}\n")
    with pytest.raises(RunDirectoryError, match="nothing to resume .* holds no run"):
        run.resume(print)
    run.create()  # no refusal
    run.metrics.write_text('{"kind": "sft"}\n')
    with pytest.raises(RunDirectoryError, match="already holds a run"):
        run.create()


def test_a_garbage_line_inside_the_metrics_stops_resume_naming_the_line(tmp_path,
                                                                        tiny_fake_run):
    config = _stopped(tmp_path, tiny_fake_run, "garbage", after=2)
    lines = config.run_dir.joinpath("metrics.jsonl").read_text().splitlines(keepends=True)
    lines[1] = "\x00\x01 not json\n"
    config.run_dir.joinpath("metrics.jsonl").write_text("".join(lines))
    with pytest.raises(RunDirectoryError, match=r"metrics.jsonl:2 is not a JSON record .*"
                                                "delete or repair that line"):
        _resume(config)


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


def test_a_full_disk_while_writing_the_trainer_state_names_the_file(tmp_path, fake_model_dir,
                                                                     monkeypatch):
    if not Path("/dev/full").is_char_device():
        pytest.skip("needs /dev/full")
    model, tokenizer = load_policy(str(fake_model_dir))
    optimizer = torch.optim.AdamW(model.parameters())

    def full_disk_open(path, mode="r", *args, **kwargs):  # trainer_state.pt lands on /dev/full
        return open("/dev/full" if Path(path).name == CHECKPOINT_STATE else path, mode,
                    *args, **kwargs)

    monkeypatch.setattr("agentcredit.run.directory.open", full_disk_open, raising=False)
    run = RunDirectory(tmp_path / "run")
    with pytest.raises(DiskFullError) as full:
        run.save_checkpoint(1, model, tokenizer, optimizer, RandomStreams.seeded(0), None, 2)
    written = tmp_path / "run" / "checkpoints" / ".tmp_update_00001" / CHECKPOINT_STATE
    assert str(full.value).startswith(f"cannot write {written}: the disk is full")
    assert run.latest_checkpoint() is None  # nothing half-written was renamed into place


def test_ctrl_c_before_anything_resumable_says_to_start_again_not_to_resume(tmp_path,
                                                                           fake_model_dir):
    from agentcredit.train.loop import TrainingInterrupted

    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    run.metrics.write_text('{"kind": "sft"}\n')  # stopped during the SFT warm start
    during_sft = str(TrainingInterrupted(run.path, 0))
    assert "nothing to resume from" in during_sft and "--overwrite" in during_sft
    assert "--resume" not in during_sft
    shutil.copytree(fake_model_dir, run.reference)  # the SFT start was saved
    assert str(TrainingInterrupted(run.path, 0)) == (
        f"interrupted at update 0; resume with: agentcredit train --resume {run.path}")


@pytest.mark.parametrize("lands_on_full", ["weights", "tokenizer", "record"])
def test_a_full_disk_at_any_checkpoint_file_is_one_line_naming_it(tmp_path, fake_model_dir,
                                                                  monkeypatch, lands_on_full):
    if not Path("/dev/full").is_char_device():
        pytest.skip("needs /dev/full")
    model, tokenizer = load_policy(str(fake_model_dir))
    optimizer = torch.optim.AdamW(model.parameters())

    def rust_full(folder, **_):  # how safetensors' Rust writer reports a full disk
        raise RuntimeError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, '
                           'message: "No space left on device" })')

    if lands_on_full == "weights":
        monkeypatch.setattr(model, "save_pretrained", rust_full)
    elif lands_on_full == "tokenizer":
        monkeypatch.setattr(tokenizer, "save_pretrained",
                            lambda folder, **_: Path("/dev/full").write_text("{}"))
    else:
        real = Path.write_text
        monkeypatch.setattr(Path, "write_text", lambda self, text, *a, **k: real(
            Path("/dev/full") if self.name == CHECKPOINT_RECORD else self, text, *a, **k))
    run = RunDirectory(tmp_path / "run")
    with pytest.raises(DiskFullError) as full:
        run.save_checkpoint(1, model, tokenizer, optimizer, RandomStreams.seeded(0), None, 2)
    message = str(full.value)
    assert "\n" not in message and "the disk is full" in message
    assert message.startswith(f"cannot write {tmp_path / 'run' / 'checkpoints'}")
    assert run.latest_checkpoint() is None
