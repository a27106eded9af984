"""A full disk is said as such, naming the file: real ENOSPC writes on ``/dev/full``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agentcredit.disk_full import DiskFullError, writing
from agentcredit.jsonl_log import JsonlLog

pytestmark = pytest.mark.skipif(not Path("/dev/full").is_char_device(),
                                reason="needs /dev/full (every write to it fails with ENOSPC)")

NAMED = "cannot write {}: the disk is full (no space left on device); free space on it"


def test_a_write_to_a_full_disk_names_the_file_and_says_the_disk_is_full():
    with pytest.raises(DiskFullError) as full, writing("runs/x/notes.txt"):
        Path("/dev/full").write_text("x")
    assert str(full.value).startswith(NAMED.format("runs/x/notes.txt"))
    assert full.value.filename is None  # the CLI prints the message as it is


def test_torch_save_through_a_file_object_fails_with_the_systems_error():
    with (pytest.raises(DiskFullError, match="trainer_state.pt: the disk is full"),
          writing("trainer_state.pt"), open("/dev/full", "wb") as handle):
        torch.save({"weights": torch.zeros(1000)}, handle)


def test_a_failure_from_rust_that_says_the_disk_is_full_is_mapped_too():
    with pytest.raises(DiskFullError, match="model.safetensors: the disk is full"), \
            writing("model.safetensors"):
        raise RuntimeError("Error while serializing: I/O error: No space left on device "
                           "(os error 28)")


def test_other_failures_pass_unchanged(tmp_path):
    with pytest.raises(IsADirectoryError), writing(tmp_path):
        tmp_path.write_text("x")


def test_a_log_on_a_full_disk_names_the_log(tmp_path):
    log_path = tmp_path / "metrics.jsonl"
    log_path.symlink_to("/dev/full")
    with JsonlLog(log_path) as log, pytest.raises(DiskFullError) as full:
        log.append([{"kind": "update", "update": 1}])
    assert str(full.value).startswith(NAMED.format(log_path))
