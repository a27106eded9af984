"""Run files are opened as regular files only: a symlink, a FIFO or an over-large file is
refused by name, and nothing behind a link is read or written (run/safe_files.py)."""

from __future__ import annotations

import os

import pytest

from agentcredit.run.directory import RunDirectory, RunDirectoryError
from agentcredit.run.safe_files import UnsafeRunFile, open_regular, read_regular


def test_a_lock_that_is_a_symlink_is_refused_and_its_target_untouched(tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    (run.path / ".lock").symlink_to(outside)
    with pytest.raises(UnsafeRunFile, match=r"\.lock is a symlink"):
        run.lock()
    assert outside.read_text() == "keep me"


@pytest.mark.parametrize("start", ["create", "resume"])
def test_a_config_yaml_that_is_a_symlink_stops_the_run_before_it_is_rewritten(tmp_path, start):
    outside = tmp_path / "other.yaml"
    outside.write_text("mine: true\n")
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    (run.path / "config.yaml").symlink_to(outside)
    run.metrics.write_text('{"kind": "sft"}\n')
    with pytest.raises(RunDirectoryError, match="config.yaml is a symlink .*never opened "
                                                "through links"):
        run.create() if start == "create" else run.resume(print)
    assert outside.read_text() == "mine: true\n"


def test_a_fifo_in_place_of_the_metrics_is_refused_by_name(tmp_path):
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    os.mkfifo(run.metrics)
    with pytest.raises(RunDirectoryError, match=r"metrics.jsonl is a FIFO, not a regular file"):
        run.resume(print)


def test_open_regular_refuses_a_fifo_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(UnsafeRunFile, match="pipe is a FIFO"):
        open_regular(tmp_path / "pipe")  # returns at once: O_NONBLOCK


def test_read_regular_refuses_a_file_over_its_limit_and_reads_one_within(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(UnsafeRunFile, match="holds 11 bytes, more than the 10"):
        read_regular(tmp_path / "big", 10)
    assert read_regular(tmp_path / "big", 11) == b"x" * 11
