"""``agentcredit eval`` and ``audit`` on every kind of model path, driven through the real CLI:
which model and update they used, the run's config, eval repeating the run's logged eval line,
eval.json, and one-line refusals of paths that hold no model."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from agentcredit.cli import main

EVAL_RUN = (
    "run.updates=2", "run.eval_every=1", "run.checkpoint_every=1", "run.keep_checkpoints=2",
    "sft.epochs=20", "sft.batch_size=4", "sft.lr=0.01",
    "rollout.group_size=2", "rollout.tasks_per_update=2", "optim.micro_batch_size=4",
    "optim.lr=1e-3",
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_fake_run) -> Path:
    """A finished 2-update run on the fake environment, evaluated after every update."""
    root = tmp_path_factory.mktemp("eval_runs")
    assert main(["train", *tiny_fake_run, *EVAL_RUN, f"run.output_dir={root}",
                 "run.name=evaluated"]) == 0
    return root / "evaluated"


def _logged_eval(run_dir: Path, update: int) -> dict:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return next(r for r in records if r["kind"] == "eval" and r["update"] == update)


def _strict_json(path: Path) -> dict:
    def refuse(constant: str):
        raise AssertionError(f"{path} holds {constant}, which is not JSON")
    return json.loads(path.read_text(), parse_constant=refuse)


def _eval_metrics(record: dict) -> dict:
    return {k: v for k, v in record.items() if k.startswith("eval/")}


@pytest.mark.parametrize("where, update, result", [
    (".", 2, "checkpoints/update_00002/eval.json"),
    ("checkpoints/update_00001", 1, "checkpoints/update_00001/eval.json"),
    ("checkpoints/update_00001/policy", 1, "checkpoints/update_00001/eval.json"),
    ("reference", 0, "eval_reference.json"),
])
def test_eval_of_a_run_path_repeats_the_eval_line_the_run_logged_for_that_update(
        run_dir, where, update, result, capsys):
    assert main(["eval", "--checkpoint", str(run_dir / where)]) == 0
    out = capsys.readouterr().out
    model = run_dir / ("reference" if where == "reference"
                       else f"checkpoints/update_{update:05d}/policy")
    assert f"evaluating model folder {model}, update {update}" in out
    assert f"config: {run_dir / 'config.yaml'}" in out  # the run's own config
    written = _strict_json(run_dir / result)
    assert f"wrote {run_dir / result}" in out
    assert written["update"] == update and written["model"] == str(model)
    logged = _eval_metrics(_logged_eval(run_dir, update))
    assert {"eval/success", "eval/valid_seen/success", "eval/valid_unseen/success",
            "eval/valid_seen/success/type0"} <= set(logged)
    assert _eval_metrics(written) == logged


def test_eval_of_a_model_folder_outside_a_run_uses_config_and_writes_eval_name_json(
        run_dir, tmp_path, capsys):
    model = tmp_path / "my_model"
    shutil.copytree(run_dir / "reference", model)
    assert main(["eval", "--checkpoint", str(model), "--config",
                 str(run_dir / "config.yaml")]) == 0
    out = capsys.readouterr().out
    assert f"evaluating model folder {model} (outside a run; seeded as update 0)" in out
    written = _strict_json(tmp_path / "eval_my_model.json")
    assert written["update"] is None
    # the same weights, config and generator as the run's start: the same numbers
    assert _eval_metrics(written) == _eval_metrics(_logged_eval(run_dir, 0))


@pytest.mark.parametrize("make, message", [
    (lambda root: root / "missing", "does not exist; pass a run directory"),
    (lambda root: root, "is not a model: pass a run directory, a checkpoint folder"),
])
def test_eval_refuses_a_path_without_a_model_in_one_line(tmp_path, make, message, capsys):
    path = make(tmp_path)
    assert main(["eval", "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err == f"error: {path} {message}" + err.split(message, 1)[1]


def test_eval_of_a_checkpoint_with_damaged_trainer_state_names_the_file(run_dir, tmp_path,
                                                                         capsys):
    checkpoint = tmp_path / "update_00002"
    shutil.copytree(run_dir / "checkpoints" / "update_00002", checkpoint)
    (checkpoint / "trainer_state.json").write_bytes(b"not a JSON file")
    assert main(["eval", "--checkpoint", str(checkpoint)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith(f"error: checkpoint {checkpoint}: cannot read trainer_state.json")
    assert err.endswith("pass an earlier checkpoint folder")


def test_eval_that_cannot_write_its_result_is_one_error_line_naming_the_file(run_dir, tmp_path,
                                                                             capsys):
    checkpoint = tmp_path / "update_00002"
    shutil.copytree(run_dir / "checkpoints" / "update_00002", checkpoint)
    (checkpoint / "eval.json").unlink(missing_ok=True)  # an earlier test's result
    (checkpoint / "eval.json").mkdir()  # stands where the result goes (a stale temporary name
    # would be cleared, run/safe_files.write_new): refused before the evaluation
    assert main(["eval", "--checkpoint", str(checkpoint), "--config",
                 str(run_dir / "config.yaml")]) == 2
    assert capsys.readouterr().err == (f"error: {checkpoint / 'eval.json'} is a directory, not a "
                                       "regular file; an output is written as a file of its "
                                       "own: move it away or write elsewhere\n")


def test_audit_of_a_run_directory_audits_its_newest_policy_with_the_runs_config(run_dir,
                                                                                capsys):
    assert main(["audit", "--checkpoint", str(run_dir), "--copies", "1"]) == 0
    out = capsys.readouterr().out
    model = run_dir / "checkpoints" / "update_00002" / "policy"
    assert f"policy: model folder {model}, update 2" in out
    assert "VICT interface audit: env fake, split valid_seen" in out  # the run's environment
    rows = {line.split("|")[1].strip() for line in out.splitlines()
            if line.startswith("| ") and "rollouts" not in line and "---" not in line}
    assert rows == {"expert", "random", "policy"}


def test_audit_refuses_a_path_without_a_model_before_the_scripted_audits(tmp_path, monkeypatch,
                                                                         capsys):
    def no_audit(*args, **kwargs):
        raise AssertionError("the expert and random audits ran before the path was checked")

    monkeypatch.setattr("agentcredit.train.evaluation.audit.scripted_traces", no_audit)
    assert main(["audit", "--env", "alfworld", "--checkpoint", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"error: {tmp_path} is not a model")


@pytest.mark.parametrize("command", [["eval"], ["audit"], ["credit-check"]])
@pytest.mark.parametrize("kind", ["a FIFO", "a link to /dev/zero"])
def test_a_model_path_that_is_a_fifo_or_a_device_is_named_in_one_line_at_once(
        tmp_path, capsys, command, kind):
    path = tmp_path / "model"
    if kind == "a FIFO":
        os.mkfifo(path)
        what = "a FIFO"
    else:
        path.symlink_to("/dev/zero")
        what = "a character device (through the link to /dev/zero)"
    began = time.perf_counter()
    assert main([*command, "--checkpoint", str(path)]) == 2
    assert capsys.readouterr().err == (f"error: {path} is {what}, not a folder: pass a run "
                                       "directory, a checkpoint folder or a model folder\n")
    assert time.perf_counter() - began < 10  # nothing waited on the FIFO or read the device


def test_audit_writes_no_file(run_dir, capsys):
    before = sorted(p for p in run_dir.rglob("*"))
    assert main(["audit", "--checkpoint", str(run_dir), "--copies", "1"]) == 0
    assert sorted(p for p in run_dir.rglob("*")) == before
