"""Nothing a run writes goes through a link planted in its folder: every temporary name and
new folder is created exclusively, the folders it writes into are never links, and a run
file with a second hard link is refused by name (run/safe_files.py, run/directory.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from agentcredit.cli import main
from agentcredit.jsonl_log import JsonlLog, truncate_lines
from agentcredit.run.directory import RunDirectory, RunDirectoryError
from agentcredit.run.random_streams import RandomStreams
from agentcredit.run.safe_files import UnsafeRunFile, new_file, new_folder, own_folder
from agentcredit.run.saved_rollouts import save_rollouts
from agentcredit.train.evaluation.evaluate import ModelSource, write_eval_result
from agentcredit.train.model_loading import load_policy

_NO_STEPS = SimpleNamespace(num_steps=0, tokens=None, traces=None)
_NO_CREDIT = SimpleNamespace(extras={}, step_advantages=torch.zeros(0), ledger_rows=[])


@pytest.fixture
def outside(tmp_path) -> Path:
    """Another run's folder, which no link planted in ours may change."""
    other = tmp_path / "other"
    (other / "update_00001").mkdir(parents=True)
    (other / "update_00001" / "keep.txt").write_text("another run's checkpoint")
    (other / "precious.txt").write_text("keep me")
    return other


def _untouched(outside: Path) -> bool:
    return (sorted(p.name for p in outside.rglob("*")) == ["keep.txt", "precious.txt",
                                                           "update_00001"]
            and (outside / "precious.txt").read_text() == "keep me"
            and (outside / "update_00001" / "keep.txt").read_text()
            == "another run's checkpoint")


def _run(tmp_path) -> RunDirectory:
    run = RunDirectory(tmp_path / "run")
    run.path.mkdir()
    return run


def test_a_link_at_the_metrics_temporary_name_is_refused_not_written_through(tmp_path,
                                                                            outside):
    run = _run(tmp_path)
    run.metrics.write_text('{"update": 1}\n{"update": 2}\n')
    (run.path / "metrics.jsonl.tmp").symlink_to(outside / "precious.txt")
    with pytest.raises(UnsafeRunFile, match=r"metrics.jsonl.tmp is a symlink \(to .*precious"):
        truncate_lines(run.metrics, 1)
    assert _untouched(outside)
    assert run.metrics.read_text() == '{"update": 1}\n{"update": 2}\n'


@pytest.mark.parametrize("planted", ["checkpoints", "checkpoints/.tmp_update_00002",
                                     "checkpoints/update_00002", ".tmp_reference", "reference"])
def test_a_link_at_a_checkpoint_or_reference_folder_is_refused_by_name(tmp_path, outside,
                                                                       fake_model_dir, planted):
    model, tokenizer = load_policy(str(fake_model_dir))
    run = _run(tmp_path)
    (run.path / planted).parent.mkdir(parents=True, exist_ok=True)
    (run.path / planted).symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafeRunFile, match=f"{planted} is a symlink"):
        if "reference" in planted:
            run.save_reference(model, tokenizer)
        else:
            run.save_checkpoint(2, model, tokenizer, torch.optim.AdamW(model.parameters()),
                                RandomStreams.seeded(0), None, keep=1)
    assert _untouched(outside)


def test_an_old_checkpoint_that_is_a_link_is_unlinked_not_deleted_through(tmp_path, outside,
                                                                         fake_model_dir):
    model, tokenizer = load_policy(str(fake_model_dir))
    run = _run(tmp_path)
    (run.checkpoints).mkdir()
    (run.checkpoints / "update_00001").symlink_to(outside / "update_00001")
    run.save_checkpoint(2, model, tokenizer, torch.optim.AdamW(model.parameters()),
                        RandomStreams.seeded(0), None, keep=1)
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["update_00002"]
    assert _untouched(outside)


@pytest.mark.parametrize("planted", ["rollouts", "rollouts/.update_00001.json.gz.tmp"])
def test_a_link_at_the_saved_rollouts_folder_or_its_temporary_file_is_refused(tmp_path,
                                                                             outside, planted):
    run = _run(tmp_path)
    (run.path / planted).parent.mkdir(parents=True, exist_ok=True)
    (run.path / planted).symlink_to(outside if planted == "rollouts"
                                    else outside / "precious.txt")
    with pytest.raises(UnsafeRunFile, match=f"{planted} is a symlink"):
        save_rollouts(run.rollouts, 1, "grpo", [], _NO_STEPS, _NO_CREDIT, None, keep=1)
    assert _untouched(outside)


def test_a_link_at_eval_json_temporary_name_is_refused(tmp_path, outside):
    checkpoint = tmp_path / "update_00001"
    checkpoint.mkdir()
    (checkpoint / "eval.json.tmp").symlink_to(outside / "precious.txt")
    source = ModelSource(checkpoint / "policy", 1, None, checkpoint / "eval.json")
    with pytest.raises(UnsafeRunFile, match="eval.json.tmp is a symlink"):
        write_eval_result(source, {"eval/success": 0.5})
    assert _untouched(outside)
    assert not (checkpoint / "eval.json").exists()


@pytest.mark.parametrize("name", ["metrics.jsonl", "ledger.jsonl", "config.yaml"])
def test_a_run_file_with_a_second_hard_link_is_refused_by_name(tmp_path, outside, name):
    run = _run(tmp_path)
    os.link(outside / "precious.txt", run.path / name)
    for start in (run.create, lambda: run.resume(print)):
        with pytest.raises(RunDirectoryError, match=f"{name} has 2 hard links"):
            start()
    with pytest.raises(UnsafeRunFile, match=f"{name} has 2 hard links"):
        JsonlLog(run.path / name).append([{"kind": "update"}])
    assert _untouched(outside)


def test_a_lock_with_a_second_hard_link_is_refused_and_its_other_name_untouched(tmp_path,
                                                                               outside):
    run = _run(tmp_path)
    os.link(outside / "precious.txt", run.path / ".lock")
    with pytest.raises(UnsafeRunFile, match=r"\.lock has 2 hard links"):
        run.lock()
    assert _untouched(outside)


def test_new_names_are_created_here_and_stale_ones_from_a_kill_replaced(tmp_path):
    (tmp_path / "stale.tmp").write_text("left by a kill")
    os.close(new_file(tmp_path / "stale.tmp"))
    assert (tmp_path / "stale.tmp").read_text() == ""
    (tmp_path / "init_model").mkdir()
    (tmp_path / "init_model" / "old.json").write_text("{}")
    assert list(new_folder(tmp_path / "init_model").iterdir()) == []
    (tmp_path / "a_file").write_text("")
    with pytest.raises(UnsafeRunFile, match="a_file is a file, not a folder"):
        own_folder(tmp_path / "a_file")


@pytest.mark.parametrize("planted", ["init_model", "checkpoints", "rollouts"])
def test_train_with_a_planted_folder_link_is_one_error_line_and_changes_nothing_outside(
        tmp_path, outside, tiny_fake_run, capsys, planted):
    run = tmp_path / "out" / "linked"
    run.mkdir(parents=True)
    (run / planted).symlink_to(outside, target_is_directory=True)
    code = main(["train", *tiny_fake_run, "run.updates=1", f"run.output_dir={run.parent}",
                 "run.name=linked"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == (f"error: {run / planted} is a symlink (to {outside}); a run writes and "
                       f"deletes inside its {planted}/, so it never follows a link there: "
                       "remove the link")
    assert _untouched(outside)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, tiny_fake_run) -> tuple[Path, Path]:
    """``(ours, other)``: two runs with checkpoints after updates 1 and 2, where our newest
    checkpoint folder is a link to the other run's."""
    root = tmp_path_factory.mktemp("two_runs")
    assert main(["train", *tiny_fake_run, "run.updates=2", "run.checkpoint_every=1",
                 "run.eval_every=0", "run.eval_at_start=false", f"run.output_dir={root}",
                 "run.name=ours"]) == 0
    ours, other = root / "ours", root / "other"
    shutil.copytree(ours, other)
    shutil.rmtree(ours / "checkpoints" / "update_00002")
    (ours / "checkpoints" / "update_00002").symlink_to(other / "checkpoints" / "update_00002",
                                                       target_is_directory=True)
    return ours, other


def _files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("given", ["", "checkpoints/update_00002",
                                   "checkpoints/update_00002/policy"])
def test_eval_of_a_run_whose_checkpoint_folder_is_a_link_writes_nothing_in_the_other_run(
        two_runs, capsys, given):
    ours, other = two_runs
    before = _files(other)
    capsys.readouterr()
    code = main(["eval", "--checkpoint", str(ours / given)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == (f"error: {ours / 'checkpoints' / 'update_00002'} is a symlink (to "
                       f"{other / 'checkpoints' / 'update_00002'}); a run writes and deletes "
                       "inside this folder, so it never follows a link here: remove the link "
                       "(the run makes the folder)")
    assert _files(other) == before
    assert not list(other.rglob("eval*.json*"))


def test_a_link_planted_where_eval_writes_is_refused_at_the_write_too(two_runs):
    ours, other = two_runs
    checkpoint = ours / "checkpoints" / "update_00002"
    source = ModelSource(checkpoint / "policy", 2, ours, checkpoint / "eval.json")
    before = _files(other)
    with pytest.raises(UnsafeRunFile, match="update_00002 is a symlink"):
        write_eval_result(source, {"eval/success": 0.5})
    assert _files(other) == before


@pytest.mark.parametrize(("plant", "mode", "result"), [
    ("symlink", [], "eval.json"), ("hard link", [], "eval.json"),
    ("symlink", ["--mode", "react"], "eval_react.json")])
def test_eval_refuses_a_link_planted_at_its_result_before_evaluating(
        two_runs, outside, monkeypatch, capsys, plant, mode, result):
    ours, _ = two_runs
    path = ours / "checkpoints" / "update_00001" / result
    for evaluation in ("evaluate.evaluate_model", "eval_modes.evaluate_model_mode"):
        monkeypatch.setattr(f"agentcredit.train.evaluation.{evaluation}",
                            lambda *args, **kwargs: pytest.fail("evaluated before the check"))
    if plant == "symlink":
        path.symlink_to(outside / "precious.txt")
        why = (f"{path} is a symlink (to {outside / 'precious.txt'}); an output is never "
               "written through a link: remove the link or write elsewhere")
    else:
        os.link(outside / "precious.txt", path)
        why = (f"{path} has 2 hard links (another name shares its bytes); an output is never "
               "written through to another name: remove it or write elsewhere")
    try:
        code = main(["eval", "--checkpoint", str(path.parent), *mode])
    finally:
        path.unlink()
    assert code == 2
    assert capsys.readouterr().err.strip() == f"error: {why}"
    assert _untouched(outside)
