"""The start cache (train/warm_start/start_cache.py): its key moves with every input of the
embedded start and with nothing else, a second run reads the start back and trains exactly as
the first, and a changed setting trains a new start."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import sys
from importlib import import_module, reload
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from agentcredit.config import load_config
from agentcredit.envs.base import Task
from agentcredit.train.loop import train
from agentcredit.train.warm_start import start_cache
from agentcredit.train.warm_start.start_cache import StartCache, start_inputs, start_key

TASKS = [Task(task_id=f"game{i}", env="alfworld", split="train", instruction=f"put {i} away",
              task_type="pick", payload={}) for i in range(3)]


def key(*overrides: str, tasks=TASKS, skills=("guide",)) -> str:
    return start_key(start_inputs(load_config(None, list(overrides)), tasks, list(skills)))


@pytest.mark.parametrize("override", [
    "sft.lr=0.002", "sft.epochs=5", "sft.batch_size=8", "sft.demonstrations_per_task=3",
    "sft.demonstration_noise=0.3", "sft.skill_share=0.5", "sft.recovery=0.2",
    "model.tiny.hidden_size=48", "model.tiny.seed=3", "model.tokenizer_games_per_type=2",
    "rollout.history_window=3", "rollout.history_style=pairs", "rollout.decoding=free",
    "rollout.action_format=tagged", "rollout.max_prompt_tokens=512", "run.seed=1",
    "run.threads=3", "env.train_games_per_type=7", "env.alfworld.generator.max_receptacles=6",
    "env=webshop"])
def test_a_setting_that_shapes_the_start_changes_its_key(override):
    assert key(override) != key()


@pytest.mark.parametrize("override", [
    "optim.lr=0.1", "run.updates=3", "credit.estimator=rloo", "env.pool_games_per_type=2",
    "env.valid_games_per_type=2", "eval.pool_episodes_per_game=9", "rollout.group_size=4",
    "rollout.temperature=1.0", "env.alfworld.cache_dir=/elsewhere", "sft.cache_dir=/elsewhere",
    "run.name=another"])
def test_a_setting_that_only_shapes_rl_or_says_where_files_lie_keeps_the_key(override):
    assert key(override) == key()


def test_the_train_games_the_skill_texts_and_the_code_enter_the_key(tmp_path, monkeypatch):
    assert key(tasks=TASKS[:2]) != key()
    assert key(tasks=[TASKS[0], TASKS[2], TASKS[1]]) != key()
    assert key(skills=("another guide",)) != key()
    package = tmp_path / "agentcredit"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sft.py").write_text("EPOCHS = 1\n")
    monkeypatch.setattr(start_cache.agentcredit, "__file__", str(package / "__init__.py"))
    before = key()
    (package / "sft.py").write_text("EPOCHS = 2\n")
    assert key() != before


#: a plug-in environment: the fake corridor with the doors of a hall in every observation
HALL = '''
from agentcredit.envs.suites import register_environment
from tests.conftest import FakeEnv, FakeSuite

DOORS = "Doors: a red one, a blue one."


class HallEnv(FakeEnv):
    def _text(self):
        return f"{super()._text()} {DOORS}"


class HallSuite(FakeSuite):
    def make_env(self):
        return HallEnv()


register_environment("hall", HallSuite)
'''


@pytest.fixture
def hall(tmp_path, monkeypatch, fake_suite):
    """The module ``hall_env`` (``HALL``) imported from ``tmp_path``, registering ``hall``;
    its file, to edit and import again (no bytecode is written, so an edit of the same length
    is read)."""
    from agentcredit.envs import suites

    monkeypatch.setattr(suites, "_SPECS", dict(suites._SPECS))
    monkeypatch.setattr(suites, "_PROVIDERS", dict(suites._PROVIDERS))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.syspath_prepend(str(tmp_path))
    source = tmp_path / "hall_env.py"
    source.write_text(HALL)
    import_module("hall_env")
    yield source
    sys.modules.pop("hall_env", None)


def test_a_plugin_environments_code_and_distribution_enter_the_key(hall, tmp_path):
    before = key("env=hall")
    assert start_inputs(load_config(None, ["env=hall"]), TASKS, [])["plugins"] == {
        "hall_env": {"distribution": None,
                     "files": {"hall_env.py": hashlib.sha256(HALL.encode()).hexdigest()}}}
    assert "hall_env" not in start_inputs(load_config(None, []), TASKS, [])["plugins"]
    hall.write_text(HALL.replace("Doors:", "Exits:"))
    edited = key("env=hall")
    assert edited != before
    info = tmp_path / "hall_env-0.1.dist-info"  # the same code, now installed with a version
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hall-env\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[agentcredit.environments]\nhall = hall_env\n")
    installed = key("env=hall")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hall-env\nVersion: 0.2\n")
    assert len({before, edited, installed, key("env=hall")}) == 4


def test_an_edited_plugin_environment_trains_its_start_again_and_says_what_changed(
        hall, tiny_fake_run, tmp_path, capsys):
    cache = tmp_path / "starts"
    settings = [*tiny_fake_run, "env=hall", "sft.cache=true", f"sft.cache_dir={cache}",
                f"run.output_dir={tmp_path}", "run.updates=1", "sft.epochs=2",
                "sft.batch_size=4", "rollout.group_size=3", "rollout.tasks_per_update=2"]
    assert "reused" not in _train(settings, "doors", capsys)
    [entry] = list(cache.iterdir())
    assert "warm start: reused" in _train(settings, "doors_again", capsys)
    hall.write_text(HALL.replace("Doors:", "Exits:"))
    reload(sys.modules["hall_env"])  # registers ``hall`` again, from the edited file
    said = _train(settings, "exits", capsys)
    assert [line for line in said.splitlines() if line.startswith("warm start:")] == [(
        f"warm start: the cached start {entry} was trained on other plug-in code (hall_env: "
        "hall_env.py edited); the start is trained again")]
    assert len(list(cache.iterdir())) == 2
    tokenizers = {(tmp_path / run / "reference" / "tokenizer.json").read_text()
                  for run in ("doors", "doors_again", "exits")}
    assert len(tokenizers) == 2  # fitted again on the new text


@pytest.fixture(scope="module")
def cached_runs(tiny_fake_run, tmp_path_factory):
    """Three runs sharing one cache: ``first`` trains and stores the start, ``second`` (the
    same settings) reads it back, ``third`` changes the SFT learning rate. Each run's stderr
    is kept."""
    root = tmp_path_factory.mktemp("cached")
    cache = root / "starts"
    settings = [*tiny_fake_run, "sft.cache=true", f"sft.cache_dir={cache}",
                f"run.output_dir={root}", "run.updates=1", "sft.epochs=4", "sft.batch_size=4",
                "rollout.group_size=3", "rollout.tasks_per_update=2"]
    return root, cache, settings


def _train(settings, name, capsys, *extra):
    capsys.readouterr()
    train(load_config(None, [*settings, f"run.name={name}", *extra]), echo=lambda _: None)
    return capsys.readouterr().err


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _untimed(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "tokens/", "sft/seconds",
                                                               "sft/reused"))}
            for r in records]


def test_a_second_run_reuses_the_start_says_so_and_trains_exactly_as_the_first(cached_runs,
                                                                              capsys):
    root, cache, settings = cached_runs
    assert "reused" not in _train(settings, "first", capsys)
    [entry] = [p for p in cache.iterdir()]
    said = _train(settings, "second", capsys)
    assert "warm start: reused the tokenizer, model and SFT" in said and str(entry) in said
    assert "sft.cache=false" in said
    first, second = _records(root / "first"), _records(root / "second")
    assert _untimed(first) == _untimed(second)
    sft = next(r for r in second if r["kind"] == "sft")
    assert sft["sft/reused"] == 1.0 and "sft/reused" not in next(r for r in first
                                                                  if r["kind"] == "sft")
    weights = [load_file(root / run / "reference" / "model.safetensors")
               for run in ("first", "second")]
    assert all(weights[0][k].equal(weights[1][k]) for k in weights[0])
    assert not (root / "second" / "init_model").exists()  # nothing was bootstrapped


def test_a_changed_sft_setting_trains_and_stores_a_new_start(cached_runs, capsys):
    root, cache, settings = cached_runs
    assert "reused" not in _train(settings, "third", capsys, "sft.lr=0.02")
    assert len(list(cache.iterdir())) == 2
    weights = [load_file(root / run / "reference" / "model.safetensors")
               for run in ("first", "third")]
    assert not all(weights[0][k].equal(weights[1][k]) for k in weights[0])


def test_no_cache_trains_every_time_and_stores_nothing(cached_runs, capsys, tmp_path):
    _, _, settings = cached_runs
    elsewhere = tmp_path / "unused"
    assert "reused" not in _train([*settings, f"sft.cache_dir={elsewhere}"], "uncached", capsys,
                                  "sft.cache=false")
    assert not elsewhere.exists()


def test_an_incomplete_entry_is_never_read_and_is_replaced(tmp_path):
    inputs = {"format": 1, "what": "a start"}
    reference = tmp_path / "reference"
    reference.mkdir()
    for name in start_cache.REFERENCE_FILES:
        (reference / name).write_text(name)
    cache = StartCache(tmp_path / "starts")
    entry = cache.store(inputs, reference, {"kind": "sft"})
    assert cache.find(inputs) == entry and entry.sft_record() == {"kind": "sft"}
    assert cache.find({**inputs, "what": "another"}) is None
    (entry.reference / "model.safetensors").unlink()
    assert cache.find(inputs) is None
    assert cache.store(inputs, reference, {"kind": "sft"}) == entry
    assert cache.find(inputs) == entry
    (entry.folder / "inputs.json").write_text(json.dumps({"format": 1, "what": "forged"}))
    assert cache.find(inputs) is None


def _two_entries(tmp_path: Path) -> tuple[StartCache, list[dict], list[Path]]:
    """A cache of two stored entries of fake model files: ``(cache, their inputs, their
    folders)``."""
    cache, inputs, folders = StartCache(tmp_path / "starts"), [], []
    for what in ("one start", "another start"):
        reference = tmp_path / what / "reference"
        reference.mkdir(parents=True)
        for name in start_cache.REFERENCE_FILES:
            (reference / name).write_text(f"{name} of {what}")
        inputs.append({"format": start_cache.FORMAT, "what": what})
        folders.append(cache.store(inputs[-1], reference, {"kind": "sft"}).folder)
    return cache, inputs, folders


def _swap(first: Path, second: Path) -> None:
    first.rename(first.with_name("swapping"))
    second.rename(first)
    first.with_name("swapping").rename(second)


def test_entries_whose_reference_folders_were_swapped_are_set_aside_not_read(tmp_path, capsys):
    cache, inputs, folders = _two_entries(tmp_path)
    assert [cache.find(i).folder for i in inputs] == folders
    _swap(folders[0] / "reference", folders[1] / "reference")
    capsys.readouterr()
    assert [cache.find(i) for i in inputs] == [None, None]
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2
    for folder, line in zip(folders, said, strict=True):
        assert line.startswith(f"warning: the cached start {folder} is unusable (its files are "
                               "not those stored under its key: reference/config.json, ")
        assert "differ from the SHA-256 in its contents.json); set aside as " in line
        assert not folder.exists()


def test_an_entry_carrying_another_keys_record_is_set_aside(tmp_path, capsys):
    cache, inputs, folders = _two_entries(tmp_path)
    for name in ("reference", start_cache.CONTENTS):  # the files and their digests, all moved
        _swap(folders[0] / name, folders[1] / name)
    capsys.readouterr()
    assert cache.find(inputs[0]) is None
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: the cached start {folders[0]} is unusable (its "
                           f"contents.json was not written for the key {folders[0].name}); ")


@pytest.fixture(scope="module")
def stored(tiny_fake_run, tmp_path_factory):
    """A cache holding the start of one run (``first``, its metrics kept to compare)."""
    root = tmp_path_factory.mktemp("stored")
    settings = [*tiny_fake_run, "sft.cache=true", f"sft.cache_dir={root / 'starts'}",
                f"run.output_dir={root}", "run.updates=1", "sft.epochs=2", "sft.batch_size=4",
                "rollout.group_size=3", "rollout.tasks_per_update=2"]
    train(load_config(None, [*settings, "run.name=first"]), echo=lambda _: None)
    return root, settings


def _nan_weights(reference: Path) -> None:
    tensors = load_file(reference / "model.safetensors")
    name = min(tensors)
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, reference / "model.safetensors", metadata={"format": "pt"})


def _symlinked_weights(reference: Path) -> None:
    outside = reference.parent.parent.parent / "weights.safetensors"
    shutil.move(reference / "model.safetensors", outside)
    (reference / "model.safetensors").symlink_to(outside)


BAD_ENTRIES = {
    "truncated weights": lambda r: (r / "model.safetensors").write_bytes(
        (r / "model.safetensors").read_bytes()[:1000]),
    "NaN weights": _nan_weights,
    "a garbage tokenizer": lambda r: (r / "tokenizer.json").write_text("not a tokenizer"),
    "a symlinked model.safetensors": _symlinked_weights,
}


@pytest.mark.parametrize("bad", sorted(BAD_ENTRIES))
def test_a_bad_cache_entry_is_named_set_aside_and_the_start_trained_and_stored_again(
        stored, tmp_path, capsys, bad):
    root, settings = stored
    cache = tmp_path / "starts"
    shutil.copytree(root / "starts", cache, symlinks=True)
    [entry] = list(cache.iterdir())
    BAD_ENTRIES[bad](entry / "reference")
    said = _train([*settings, f"sft.cache_dir={cache}", f"run.output_dir={tmp_path}"], "again",
                  capsys)
    [warning] = [line for line in said.splitlines() if "cached start" in line]
    assert warning.startswith(f"warning: the cached start {entry} is unusable (")
    assert f"set aside as {cache}/.unusable-{entry.name}-" in warning
    assert warning.endswith(", and the start is trained again")
    assert "reused" not in said
    assert _untimed(_records(tmp_path / "again")) == _untimed(_records(root / "first"))
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == [entry.name]
    assert load_file(entry / "reference" / "model.safetensors")  # stored afresh, whole


def test_a_cache_folder_that_is_a_file_is_skipped_with_one_line(stored, tmp_path, capsys):
    root, settings = stored
    (tmp_path / "starts").write_text("not a folder")
    said = _train([*settings, f"sft.cache_dir={tmp_path / 'starts'}",
                   f"run.output_dir={tmp_path}"], "beside", capsys)
    [warning] = [line for line in said.splitlines() if "sft.cache_dir" in line]
    assert warning.startswith(f"warning: sft.cache_dir {tmp_path / 'starts'} cannot be used (")
    assert warning.endswith("; the run goes on without storing its start there")
    assert _untimed(_records(tmp_path / "beside")) == _untimed(_records(root / "first"))


def test_a_full_cache_disk_is_skipped_with_one_line_and_leaves_no_partial_entry(
        stored, tmp_path, capsys, monkeypatch):
    root, settings = stored

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(start_cache.shutil, "copytree", full)
    said = _train([*settings, f"sft.cache_dir={tmp_path / 'starts'}",
                   f"run.output_dir={tmp_path}"], "full", capsys)
    [warning] = [line for line in said.splitlines() if "sft.cache_dir" in line]
    assert "the disk is full" in warning and "the run goes on" in warning
    assert list((tmp_path / "starts").iterdir()) == []
    assert _untimed(_records(tmp_path / "full")) == _untimed(_records(root / "first"))


def test_a_run_whose_entry_holds_another_configurations_reference_trains_its_start_again(
        stored, tmp_path, capsys):
    root, settings = stored
    cache = tmp_path / "starts"
    shutil.copytree(root / "starts", cache, symlinks=True)
    [entry] = list(cache.iterdir())
    here = [*settings, f"sft.cache_dir={cache}", f"run.output_dir={tmp_path}"]
    assert "reused" not in _train(here, "other", capsys, "sft.lr=0.02")
    [other] = [p for p in cache.iterdir() if p != entry]
    _swap(entry / "reference", other / "reference")
    said = _train(here, "again", capsys)
    [warning] = [line for line in said.splitlines() if "cached start" in line]
    assert warning.startswith(f"warning: the cached start {entry} is unusable (its files are "
                              "not those stored under its key: ")
    assert "reused" not in said
    assert _untimed(_records(tmp_path / "again")) == _untimed(_records(root / "first"))
