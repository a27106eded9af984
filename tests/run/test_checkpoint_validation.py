"""A checkpoint is validated as a whole before resume uses it: weights that are not the model
and a trainer state outside its schema each make resume fall back to the checkpoint before,
saying why in one line (run/directory.py, run/model_folder.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from agentcredit.config import load_config
from agentcredit.run.directory import CHECKPOINT_RECORD, CHECKPOINT_STATE, RunDirectory
from agentcredit.train.loop import train

RUN = ("run.updates=3", "run.checkpoint_every=1", "run.keep_checkpoints=3", "run.eval_every=0",
       "run.eval_at_start=false")


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, tiny_fake_run) -> Path:
    """A run with checkpoints after updates 1, 2 and 3."""
    root = tmp_path_factory.mktemp("stopped")
    config = load_config(None, [*tiny_fake_run, *RUN, f"run.output_dir={root}", "run.name=run"])
    train(config, echo=lambda _: None)
    return config.run_dir


def _weights(policy: Path, change: Callable[[dict], dict]) -> None:
    path = policy / "model.safetensors"
    save_file(change(load_file(path)), path, metadata={"format": "pt"})


def _record(checkpoint: Path, change: Callable[[dict], None]) -> None:
    record = json.loads((checkpoint / CHECKPOINT_RECORD).read_text())
    change(record)
    (checkpoint / CHECKPOINT_RECORD).write_text(json.dumps(record))


def _nan_first(tensors: dict) -> dict:
    name = min(tensors)
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    return tensors


def _wrong_shape(tensors: dict) -> dict:
    tensors["model.norm.weight"] = torch.ones(tensors["model.norm.weight"].shape[0] + 1)
    return tensors


def _rng(record: dict) -> None:
    record["random"]["numpy_random"]["state"]["key"] = [1, 2, 3]


def _deep(checkpoint: Path) -> None:
    (checkpoint / CHECKPOINT_RECORD).write_text("[" * 5000 + "]" * 5000)


def _symlinked_state(checkpoint: Path) -> None:
    outside = checkpoint.parent.parent / "elsewhere.pt"
    shutil.move(checkpoint / CHECKPOINT_STATE, outside)
    (checkpoint / CHECKPOINT_STATE).symlink_to(outside)


def _optimizer_moment(checkpoint: Path) -> None:
    saved = torch.load(checkpoint / CHECKPOINT_STATE, weights_only=True)
    first = next(iter(saved["optimizer"]["state"].values()))
    first["exp_avg"] = torch.zeros(3, 3)
    torch.save(saved, checkpoint / CHECKPOINT_STATE)


DAMAGES = {
    "no tensors": (lambda c: _weights(c / "policy", lambda _: {}),
                   "its policy/model.safetensors holds no tensors"),
    "a missing parameter": (
        lambda c: _weights(c / "policy", lambda t: {k: v for k, v in t.items()
                                                    if k != "model.norm.weight"}),
        "the weights lack 1 of the"),
    "a wrong shape": (lambda c: _weights(c / "policy", _wrong_shape),
                      "the weights give model.norm.weight the shape"),
    "NaN weights": (lambda c: _weights(c / "policy", _nan_first),
                    "its policy/model.safetensors holds NaN or infinite values"),
    "a negative line count": (
        lambda c: _record(c, lambda r: r["log_lines"].update({"metrics.jsonl": -4})),
        "log_lines = "),
    "an update other than the folder's": (lambda c: _record(c, lambda r: r.update(update=-7)),
                                          "update = -7 is not an integer >= 1"),
    "an enormous update": (lambda c: _record(c, lambda r: r.update(update=10 ** 30)),
                           "update = 1000000000000000000000000000000 is not"),
    "a malformed RNG state": (lambda c: _record(c, _rng), "random = "),
    "a deeply nested record": (_deep, "cannot read trainer_state.json (nests arrays and objects"),
    "a symlinked trainer_state.pt": (_symlinked_state, "trainer_state.pt is a symlink"),
    "an optimizer of another shape": (_optimizer_moment, "gives parameter 0 an exp_avg of shape"),
    "an update the metrics never logged": (
        lambda c: _record(c, lambda r: r["log_lines"].update({"metrics.jsonl": 2})),
        "but the metrics lines it counts end at update 1"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_newest_checkpoint_falls_back_to_the_one_before_saying_why(
        stopped, tmp_path, damage):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir, symlinks=True)
    apply, clause = DAMAGES[damage]
    apply(run_dir / "checkpoints" / "update_00003")
    said: list[str] = []
    point = RunDirectory(run_dir).resume(said.append)
    assert point.update == 2
    unusable = [line for line in said if line.startswith("checkpoint update_00003 is unusable: ")]
    assert len(unusable) == 1 and clause in unusable[0], said
    assert unusable[0].endswith("; trying the one before")


def test_an_undamaged_copy_resumes_from_its_newest_checkpoint(stopped, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir, symlinks=True)
    said: list[str] = []
    assert RunDirectory(run_dir).resume(said.append).update == 3
    assert said == []
