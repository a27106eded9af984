"""A checkpoint's trainer state runs no code when read: a crafted object is refused unread,
and the earlier format is read by the weights-only loader with a notice
(run/trainer_state.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from agentcredit.run.directory import RunDirectory, RunDirectoryError
from agentcredit.run.trainer_state import CHECKPOINT_RECORD, CHECKPOINT_STATE, read_trainer_state
from agentcredit.train.evaluation.evaluate import locate_model

from .conftest import _records, _resume, _stopped, _without_timings


class _Crafted:
    """An object that runs code when unpickled: it writes ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').write('ran')",)


def test_a_checkpoint_state_holding_a_crafted_object_is_refused_and_never_run(
        full, tmp_path, tiny_fake_run):
    config = _stopped(tmp_path, tiny_fake_run, "crafted", after=3)
    marker = tmp_path / "the_payload_ran"
    torch.save({"optimizer": _Crafted(marker), "random": {}},
               config.run_dir / "checkpoints" / "update_00003" / CHECKPOINT_STATE)
    said = _resume(config)
    assert not marker.exists()
    assert ("checkpoint update_00003 is unusable: trainer_state.pt holds objects other than "
            "tensors and plain data, refused unread (loading them could run code); trying the "
            "one before") in said
    assert _without_timings(_records(config.run_dir)) == _without_timings(_records(full))


def test_eval_refuses_an_earlier_format_state_holding_a_crafted_object(full, tmp_path):
    checkpoint = tmp_path / "update_00004"
    shutil.copytree(RunDirectory(full).latest_checkpoint(), checkpoint)
    (checkpoint / CHECKPOINT_RECORD).unlink()
    marker = tmp_path / "the_payload_ran"
    torch.save({"update": 4, "log_lines": {}, "payload": _Crafted(marker)},
               checkpoint / CHECKPOINT_STATE)
    with pytest.raises(RunDirectoryError, match="refused unread"):
        locate_model(checkpoint)
    assert not marker.exists()


def test_a_checkpoint_of_the_earlier_format_resumes_with_a_notice(full, tmp_path, tiny_fake_run):
    config = _stopped(tmp_path, tiny_fake_run, "earlier", after=3)
    checkpoint = config.run_dir / "checkpoints" / "update_00003"
    state = read_trainer_state(checkpoint)
    numpy_state = state["random"]["numpy_random"]  # back to the pickled legacy tuple
    state["random"]["numpy_random"] = (
        "MT19937", np.array(numpy_state["state"]["key"], dtype=np.uint32),
        numpy_state["state"]["pos"], numpy_state["has_gauss"], numpy_state["gauss"])
    for name in ("task_rng", "python_random"):
        version, internal, gauss = state["random"][name]
        state["random"][name] = (version, tuple(internal), gauss)
    del state["format"]
    torch.save(state, checkpoint / CHECKPOINT_STATE)
    (checkpoint / CHECKPOINT_RECORD).unlink()
    said = _resume(config)
    assert ("checkpoint update_00003 has the earlier trainer-state format; reading it with "
            "torch's weights-only loader") in said
    assert "resuming after update 3" in " ".join(said)
    assert _without_timings(_records(config.run_dir)) == _without_timings(_records(full))


def test_every_torch_load_in_the_package_is_weights_only():
    import ast

    import agentcredit

    loads = []
    for path in Path(agentcredit.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "load" and getattr(node.func.value, "id", "") == "torch"):
                flag = next((k.value for k in node.keywords if k.arg == "weights_only"), None)
                loads.append((path.name, isinstance(flag, ast.Constant) and flag.value is True))
    assert loads and all(safe for _, safe in loads), loads
