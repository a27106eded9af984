"""A checkpoint is validated as a whole before resume uses it: weights that are not the model
and a trainer state outside its schema each make resume fall back to the checkpoint before,
saying why in one line (run/directory.py, run/trainer_state.py, run/model_folder.py)."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from agentcredit.cli import main
from agentcredit.config import load_config
from agentcredit.run.directory import CONFIG_DIGEST, RunDirectory, RunDirectoryError
from agentcredit.run.trainer_state import CHECKPOINT_RECORD, CHECKPOINT_STATE
from agentcredit.train.loop import train

RUN = ("run.updates=3", "run.checkpoint_every=1", "run.keep_checkpoints=3", "run.eval_every=0",
       "run.eval_at_start=false")


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, tiny_fake_run) -> Path:
    """A run with checkpoints after updates 1, 2 and 3: its metrics.jsonl holds the SFT line,
    updates 1 to 3 (lines 2 to 4) and the evaluation after update 3 (line 5)."""
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


def _zip_bomb(checkpoint: Path) -> None:
    # 256 MiB of zeros deflate to a quarter of a MiB; torch stores its entries uncompressed
    with zipfile.ZipFile(checkpoint / CHECKPOINT_STATE, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", b"", compress_type=zipfile.ZIP_STORED)
        with archive.open("archive/data/0", "w") as entry:
            for _ in range(256):
                entry.write(bytes(1 << 20))


def _optimizer_moment(checkpoint: Path) -> None:
    saved = torch.load(checkpoint / CHECKPOINT_STATE, weights_only=True)
    first = next(iter(saved["optimizer"]["state"].values()))
    first["exp_avg"] = torch.zeros(3, 3)
    torch.save(saved, checkpoint / CHECKPOINT_STATE)


def _zero_stride_moment(checkpoint: Path) -> None:
    saved = torch.load(checkpoint / CHECKPOINT_STATE, weights_only=True)
    first = next(iter(saved["optimizer"]["state"].values()))
    # one float on disk, read back as a 2^20 x 2^20 view: any operation on it allocates 4 TiB
    first["exp_avg"] = torch.zeros(1).as_strided((HUGE, HUGE), (0, 0))
    torch.save(saved, checkpoint / CHECKPOINT_STATE)
    seen = next(iter(torch.load(checkpoint / CHECKPOINT_STATE, weights_only=True)
                     ["optimizer"]["state"].values()))["exp_avg"]
    assert (seen.shape, seen.stride(), seen.untyped_storage().nbytes()) == ((HUGE, HUGE), (0, 0),
                                                                            4)


def _storage_cut_short(checkpoint: Path) -> None:
    with zipfile.ZipFile(checkpoint / CHECKPOINT_STATE) as archive:
        entries = {entry.filename: archive.read(entry) for entry in archive.infolist()}
    largest = max((name for name in entries if "/data/" in name), key=lambda n: len(entries[n]))
    entries[largest] = entries[largest][:len(entries[largest]) // 2]
    with zipfile.ZipFile(checkpoint / CHECKPOINT_STATE, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


HUGE = 2 ** 20
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
    "a trainer_state.pt that is a zip bomb": (
        _zip_bomb, "trainer_state.pt holds a compressed entry (archive/data/0)"),
    "a zero-stride moment declared far larger than its storage": (
        _zero_stride_moment, f"trainer_state.pt declares a tensor of shape [{HUGE}, {HUGE}] "),
    "a storage entry cut short": (_storage_cut_short, "trainer_state.pt declares storage data/"),
    "a trainer_state.pt that is not a zip archive": (
        lambda c: (c / CHECKPOINT_STATE).write_bytes(b"\x80\x02}q\x00."),
        "cannot read trainer_state.pt as the zip archive torch writes"),
    # the eval after update 3 (line 5) is update 3's own: a count of 4 would cut it unsaid
    "a metrics count one short": (
        lambda c: _record(c, lambda r: r["log_lines"].update({"metrics.jsonl": 4})),
        "cutting metrics.jsonl to 4 lines would cut line 5, a row of update 3"),
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


def test_a_ledger_count_of_0_falls_back_and_cuts_exactly_the_rows_after_the_fallback(
        stopped, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir, symlinks=True)
    # ten ledger rows per update, each checkpoint counting those of its updates ...
    (run_dir / "ledger.jsonl").write_text("".join(f'{{"update": {u}, "row": {i}}}\n'
                                                  for u in (1, 2, 3) for i in range(10)))
    for update in (1, 2, 3):
        _record(run_dir / "checkpoints" / f"update_0000{update}",
                lambda r, u=update: r["log_lines"].update({"ledger.jsonl": 10 * u}))
    # ... but the newest says 0: cutting to it would delete the 30 rows of updates 1 to 3
    _record(run_dir / "checkpoints" / "update_00003",
            lambda r: r["log_lines"].update({"ledger.jsonl": 0}))
    said: list[str] = []
    assert RunDirectory(run_dir).resume(said.append).update == 2
    assert said == [("checkpoint update_00003 is unusable: cutting ledger.jsonl to 0 lines would "
                    "cut line 1, a row of update 1, though the checkpoint is after update 3 (its "
                    "line count disagrees with the file); trying the one before")]
    assert (run_dir / "ledger.jsonl").read_text() == "".join(
        f'{{"update": {u}, "row": {i}}}\n' for u in (1, 2) for i in range(10))
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(m["kind"], m["update"]) for m in metrics] == [("sft", 0), ("update", 1),
                                                           ("update", 2)]


BAD_LINES = {
    "invalid UTF-8": (b'{"kind": "update", "update": "\xff\xfe"}', "is not UTF-8 text"),
    "nested 10,000 deep": (b"[" * 10_000 + b"]" * 10_000, "nests arrays and objects"),
    "a 50,000-digit integer": (b'{"update": ' + b"9" * 50_000 + b"}",
                               "holds a number of 50000 characters"),
    "NaN": (b'{"kind": "update", "update": 2, "loss": NaN}', "holds NaN"),
    "not an object": (b"[1, 2]", "is a JSON list"),
}


@pytest.mark.parametrize("bad", sorted(BAD_LINES))
def test_a_bad_middle_metrics_line_stops_resume_naming_it_before_anything_is_cut(
        stopped, tmp_path, bad):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir, symlinks=True)
    line, why = BAD_LINES[bad]
    lines = (run_dir / "metrics.jsonl").read_bytes().split(b"\n")
    lines[2] = line  # line 3 of 5
    (run_dir / "metrics.jsonl").write_bytes(b"\n".join(lines))
    before = {log: (run_dir / log).read_bytes() for log in ("metrics.jsonl", "ledger.jsonl")}
    with pytest.raises(RunDirectoryError) as stop:
        RunDirectory(run_dir).resume(lambda _: None)
    message = str(stop.value)
    assert message.startswith(f"{run_dir / 'metrics.jsonl'}:3 is not a JSON record (the line ")
    assert why in message and "\n" not in message
    assert message.endswith("delete or repair that line, or start the run again with "
                            "--overwrite")
    assert {log: (run_dir / log).read_bytes() for log in before} == before


def test_a_hand_edited_config_yaml_is_named_before_anything_runs(stopped, tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir, symlinks=True)
    config = run_dir / "config.yaml"
    text = config.read_text()
    assert text.startswith(CONFIG_DIGEST)
    config.write_text(text.replace("seed: 0\n", "seed: 1\n", 1))
    before = (run_dir / "metrics.jsonl").read_bytes()
    assert main(["train", "--resume", str(run_dir), "run.updates=4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: {config} is not the config this run wrote (it was "
                              "edited by hand)")
    assert (run_dir / "metrics.jsonl").read_bytes() == before
    assert not (run_dir / "checkpoints" / "update_00004").exists()


def test_an_undamaged_copy_resumes_from_its_newest_checkpoint(stopped, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir, symlinks=True)
    said: list[str] = []
    assert RunDirectory(run_dir).resume(said.append).update == 3
    assert said == []


def test_resume_past_a_zero_stride_moment_falls_back_in_one_line_and_trains_on(stopped,
                                                                              tmp_path, capsys):
    run_dir = tmp_path / "run"
    shutil.copytree(stopped, run_dir, symlinks=True)
    _zero_stride_moment(run_dir / "checkpoints" / "update_00003")
    capsys.readouterr()
    assert main(["train", "--resume", str(run_dir), "run.updates=4"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert [line for line in said if "unusable" in line] == [(
        "checkpoint update_00003 is unusable: trainer_state.pt declares a tensor of shape "
        f"[{HUGE}, {HUGE}] (4,398,046,511,104 bytes) over a storage of 4 bytes; a damaged or "
        "crafted file, not loaded; trying the one before")]
    assert (run_dir / "checkpoints" / "update_00004" / CHECKPOINT_STATE).is_file()
