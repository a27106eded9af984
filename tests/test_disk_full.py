"""A full disk is said as such, naming the file: real ENOSPC writes on ``/dev/full``."""

from __future__ import annotations

import errno
import io
from pathlib import Path

import pytest
import torch

from agentcredit.cli import _report
from agentcredit.disk_full import DiskFullError, writing
from agentcredit.jsonl_log import JsonlLog
from agentcredit.run.directory import RunDirectory
from agentcredit.run.random_streams import RandomStreams
from agentcredit.run.trainer_state import CHECKPOINT_STATE
from agentcredit.train.model_loading import load_policy

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


class _FullAfter(io.RawIOBase):
    """A file that takes ``room`` bytes, then fails as a full disk does."""

    def __init__(self, room: int):
        self.room = room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return len(data)


def test_a_disk_that_fills_inside_torchs_zip_writer_is_said_as_full_not_as_its_error():
    # the write of data/0 fails after the archive's first entries: torch raises
    # "RuntimeError: [enforce fail at inline_container.cc:...] unexpected pos", ENOSPC inside
    with (pytest.raises(DiskFullError, match="trainer_state.pt: the disk is full"),
          writing("trainer_state.pt")):
        torch.save({"weights": torch.zeros(1000)}, _FullAfter(100))


def test_a_disk_that_fills_inside_the_trainer_states_zip_is_one_error_line(
        tmp_path, fake_model_dir, monkeypatch, capsys):
    model, tokenizer = load_policy(str(fake_model_dir))
    real_open = open

    def fills_at_the_state(path, mode):
        return _FullAfter(100) if Path(path).name == CHECKPOINT_STATE else real_open(path, mode)

    monkeypatch.setattr("agentcredit.run.directory.open", fills_at_the_state, raising=False)
    with pytest.raises(DiskFullError) as full:
        RunDirectory(tmp_path / "run").save_checkpoint(
            1, model, tokenizer, torch.optim.AdamW(model.parameters()), RandomStreams.seeded(0),
            None, 2)
    written = tmp_path / "run" / "checkpoints" / ".tmp_update_00001" / CHECKPOINT_STATE
    assert str(full.value).startswith(NAMED.format(written))
    assert _report(full.value, debug=False) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"error: {full.value}"


def test_a_failure_from_rust_that_says_the_disk_is_full_is_mapped_too():
    with pytest.raises(DiskFullError, match="model.safetensors: the disk is full"), \
            writing("model.safetensors"):
        raise RuntimeError("Error while serializing: I/O error: No space left on device "
                           "(os error 28)")


def test_other_failures_pass_unchanged(tmp_path):
    with pytest.raises(IsADirectoryError), writing(tmp_path):
        tmp_path.write_text("x")


def test_a_log_on_a_full_disk_names_the_log(tmp_path, monkeypatch):
    log_path = tmp_path / "metrics.jsonl"  # a log is never opened through a link: no /dev/full

    def no_space(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("os.write", no_space)
    with JsonlLog(log_path) as log, pytest.raises(DiskFullError) as full:
        log.append([{"kind": "update", "update": 1}])
    assert str(full.value).startswith(NAMED.format(log_path))
