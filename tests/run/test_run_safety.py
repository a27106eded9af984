"""One run per folder, Ctrl-C that says how to resume, --overwrite: driven through the real CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from agentcredit.cli import main

from .fake_cli import cli_command


def _start(out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(cli_command(*args), stdout=out.open("w"),
                            stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _wait_for(out: Path, text: str, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + 300
    while text not in out.read_text():
        assert child.poll() is None, out.read_text()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.slow
def test_one_run_per_folder_ctrl_c_and_a_killed_holder(tmp_path, tiny_fake_run):
    args = ["train", *tiny_fake_run, "run.updates=400", "run.eval_every=0",
            "run.checkpoint_every=1", f"run.output_dir={tmp_path}", "run.name=shared"]
    first = _start(tmp_path / "first.txt", *args)
    _wait_for(tmp_path / "first.txt", "eval after update 0", first)
    second = subprocess.run(cli_command(*args), capture_output=True,
                            text=True, timeout=300, check=False)
    assert second.returncode == 2
    assert second.stderr.strip().splitlines()[-1] == (
        f"error: run directory {tmp_path / 'shared'} is in use by process {first.pid}; wait for "
        "it to finish or choose another run.name=...")
    first.send_signal(signal.SIGINT)
    assert first.wait(timeout=120) == 130
    last = (tmp_path / "first.txt").read_text().strip().splitlines()[-1]
    assert last.startswith("interrupted at update ")
    assert last.endswith(f"; resume with: agentcredit train --resume {tmp_path / 'shared'}")
    # a holder killed with SIGKILL leaves no lock behind: the next --resume takes the folder
    resumed = _start(tmp_path / "resumed.txt", "train", "--resume", str(tmp_path / "shared"))
    _wait_for(tmp_path / "resumed.txt", "resuming after update", resumed)
    resumed.send_signal(signal.SIGKILL)
    resumed.wait()
    again = subprocess.run(
        cli_command("train", "--resume", str(tmp_path / "shared"), "run.updates=1"),
        capture_output=True, text=True, timeout=300, check=False)
    assert "is in use" not in again.stderr


def test_overwrite_starts_a_used_folder_again(tmp_path, tiny_fake_run, capsys):
    args = ["train", *tiny_fake_run, "run.updates=1", "run.eval_every=0",
            "run.eval_at_start=false", f"run.output_dir={tmp_path}", "run.name=again"]
    for extra, code in (((), 0), ((), 2), (("--overwrite",), 0)):
        assert main([*args, *extra]) == code
        if code == 2:
            assert "--overwrite" in capsys.readouterr().err.strip().splitlines()[-1]
    metrics = (tmp_path / "again" / "metrics.jsonl").read_text().splitlines()
    assert [line.split('"kind": ')[1].split(",")[0] for line in metrics] == [
        '"sft"', '"update"', '"eval"']
