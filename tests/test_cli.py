"""The ``agentcredit`` command line: train, resume, eval, config, and one-line errors."""

from __future__ import annotations

import pytest
import yaml

from agentcredit.cli import main
from agentcredit.config import config_to_dict, load_config

CLI_RUN = (
    "run.updates=1", "sft.epochs=20", "sft.batch_size=4", "sft.lr=0.01",
    "rollout.group_size=2", "rollout.tasks_per_update=2", "optim.micro_batch_size=4",
)


@pytest.fixture
def config_file(tmp_path, tiny_fake_run):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config_to_dict(load_config(None, [*tiny_fake_run, *CLI_RUN]))))
    return path


def test_train_prints_the_run_directory_and_success_before_and_after(config_file, tmp_path,
                                                                     capsys):
    status = main(["train", "--config", str(config_file), f"run.output_dir={tmp_path}",
                   "run.name=cli"])
    out = capsys.readouterr().out
    assert status == 0
    assert out.count(f"run directory: {(tmp_path / 'cli').resolve()}") == 1
    assert "held-out: 4 new games RL never trains on (valid_seen, valid_unseen)" in out
    assert "  before RL (after SFT): " in out and "  after 1 updates:      " in out


def test_resuming_a_finished_run_reports_its_last_evaluation(finished_run, tmp_path, capsys):
    import json
    import shutil

    run = tmp_path / "done"
    shutil.copytree(finished_run, run)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    last_eval = max(i for i, line in enumerate(lines) if '"kind": "eval"' in line)
    record = json.loads(lines[last_eval])
    # every game won: distinct from the start, so the two cannot be confused
    record.update({key: "1" * len(value) for key, value in record.items()
                   if key.endswith("/won")})
    lines[last_eval] = json.dumps(record)
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    after = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("  after 1 updates:")]
    assert after and after[0].split()[3] == "100.0%"


@pytest.mark.parametrize("name", ["", "a/b", ".."])
def test_a_run_name_that_is_not_one_folder_is_refused(name, capsys):
    assert main(["train", f"run.name={name}"]) == 2
    assert "must name one folder under run.output_dir" in capsys.readouterr().err


def test_resume_continues_a_run_and_eval_reads_its_latest_checkpoint(config_file, tmp_path,
                                                                     capsys):
    run_dir = tmp_path / "cli"
    assert main(["train", "--config", str(config_file), f"run.output_dir={tmp_path}",
                 "run.name=cli"]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(run_dir), "run.updates=2", "method=grpo",
                 "run.device=cpu", "run.keep_checkpoints=3"]) == 0
    out = capsys.readouterr().out
    assert "  after 2 updates:" in out
    # method=grpo restates the run's method: nothing to accept; unchanged keys are not listed
    assert [line for line in out.splitlines() if line.startswith("resume:")] == [
        "resume: accepted run.updates=2 (was 1)", "resume: accepted run.keep_checkpoints=3 (was 2)"]
    assert (run_dir / "checkpoints" / "update_00002").is_dir()
    assert main(["eval", "--checkpoint", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert '"eval/valid_seen/success"' in out and "success: " in out


@pytest.mark.parametrize("override, message", [
    ("rollout.group_sise=4",
     "error: unknown config key 'rollout.group_sise'; did you mean 'rollout.group_size'?"),
    ("rollout.temperature=-2",
     "error: rollout.temperature = -2.0 is out of range; allowed [0.0, 10.0]"),
])
def test_config_errors_are_one_line_and_exit_with_status_2(override, message, capsys):
    assert main(["train", override]) == 2
    err = capsys.readouterr().err
    assert err.strip() == message


@pytest.mark.parametrize("overrides, start", [
    ("method=adr", "error: method = 'adr' is not a method name; did you mean 'adrs'?"),
    ("optim.aux_loss=kl", "error: optim.aux_loss = 'kl' is not allowed; choose one of none, opsd"),
    ("sft.skill_share=2", "error: sft.skill_share = 2.0 is out of range; allowed [0.0, 1.0]"),
    ("method=adrs rollout.skills=true",
     "error: rollout.skills = true shows the skill to the acting policy, but credit.estimator"),
    ("method=sdar rollout.skills=true",
     ("error: rollout.skills = true shows the skill to the acting policy, but credit.estimator "
      "= 'grpo' with optim.aux_loss = 'sdar' runs a privileged teacher")),
    ("method=adrs credit.options.gate=L4",
     "error: credit.options.gate = 'L4' is not allowed; choose one of off, L1, L2, L3"),
    ("method=vict credit.options.backbone.name=gigpo credit.options.backbone.mode=mean",
     ("error: credit.options.backbone.mode = 'mean' is not allowed; choose one of "
      "mean_std_norm, mean_norm; did you mean 'mean_norm'?")),
    ("env.name=alfwrld", ("error: env.name = 'alfwrld' is not a registered environment; did "
                          "you mean 'alfworld'?")),
    ("eval.splits=[valid_sen]", "error: eval.splits: 'valid_sen' is not a split of alfworld"),
    ("optim.lr=.nan", "error: optim.lr = nan must be a finite number"),
    ("run.seed=-1", "error: run.seed = -1 is out of range; allowed [0, 4294967295]"),
])
def test_method_and_skill_setting_errors_are_one_line(overrides, start, capsys):
    assert main(["train", *overrides.split()]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(start)


def test_a_missing_model_directory_is_one_clear_error(config_file, tmp_path, capsys):
    status = main(["train", "--config", str(config_file), f"run.output_dir={tmp_path}",
                   "--model", str(tmp_path / "nope"), "sft.enabled=false"])
    err = capsys.readouterr().err.strip()
    assert status == 2 and err.startswith("error: model directory") and "\n" not in err


def test_audit_prints_the_interface_table_for_expert_random_and_policy(config_file, tmp_path,
                                                                       capsys):
    assert main(["train", "--config", str(config_file), f"run.output_dir={tmp_path}",
                 "run.name=audited"]) == 0
    capsys.readouterr()
    policy = next((tmp_path / "audited" / "checkpoints").glob("update_*")) / "policy"
    status = main(["audit", "--env", "fake", "--config", str(config_file), "--copies", "3",
                   "--checkpoint", str(policy), "--split", "train"])
    out = capsys.readouterr().out
    assert status == 0
    rows = {line.split("|")[1].strip(): line.split("|") for line in out.splitlines()
            if line.startswith("| ") and "rollouts" not in line and "---" not in line}
    assert set(rows) == {"expert", "random", "policy"}
    assert all(float(cells[4]) == 100.0 for cells in rows.values())  # reconstruction %
    assert rows["expert"][2].strip() == str(3 * 4)  # 4 train tasks × 3 copies


def test_audit_rejects_zero_copies(capsys):
    assert main(["audit", "--env", "alfworld", "--copies", "0"]) == 2
    assert "--copies 0" in capsys.readouterr().err


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_fake_run):
    """A finished 1-update run (left unchanged by the tests that use it)."""
    root = tmp_path_factory.mktemp("cli_runs")
    assert main(["train", *tiny_fake_run, *CLI_RUN, f"run.output_dir={root}",
                 "run.name=done"]) == 0
    return root / "done"


@pytest.mark.parametrize("overrides, refused", [
    (["run.seed=3"], ["run.seed (0 -> 3)"]),
    (["--model", "/elsewhere/model"], ["model.name (embedded -> /elsewhere/model)"]),
    (["method=vict", "credit.options.backbone=gigpo", "run.updates=5"],
     ["credit.estimator (grpo -> vict)", "credit.options.backbone.name (unset -> gigpo)"]),
    (["sft.epochs=1", "rollout.group_size=4", "optim.lr=0.5", "env.valid_games_per_type=3"],
     ["sft.epochs (20.0 -> 1.0)", "rollout.group_size (2 -> 4)", "optim.lr (0.0003 -> 0.5)",
      "env.valid_games_per_type (1 -> 3)"]),
])
def test_resume_refuses_changes_to_the_runs_meaning_naming_each_key(finished_run, overrides,
                                                                     refused, capsys):
    before = {name: (finished_run / name).read_bytes() for name in ("config.yaml",
                                                                     "metrics.jsonl")}
    assert main(["train", "--resume", str(finished_run), *overrides]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"error: --resume {finished_run} refuses ")
    listed = err.split(" refuses ", 1)[1].split(": they change what the run means", 1)[0]
    assert listed.startswith(", ".join(refused))
    assert "run.updates" not in listed  # safe: it would be accepted
    assert err.endswith("Resume accepts only run.updates, run.eval_every, run.checkpoint_every, "
                        "run.keep_checkpoints, run.progress, run.threads, run.device, "
                        "run.save_rollouts, run.keep_rollouts, run.tensorboard, run.wandb, "
                        "eval.probes")
    assert before == {name: (finished_run / name).read_bytes() for name in before}


@pytest.mark.parametrize("extra, start", [
    (["--config", "other.yaml"], "error: --config cannot be used with --resume"),
    (["--overwrite"], "error: --overwrite cannot be used with --resume"),
])
def test_resume_refuses_a_new_config_file_or_overwrite(finished_run, extra, start, capsys):
    assert main(["train", "--resume", str(finished_run), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(start)


def test_group_size_one_warns_that_nothing_trains(config_file, tmp_path, capsys):
    assert main(["train", "--config", str(config_file), f"run.output_dir={tmp_path}",
                 "rollout.group_size=1"]) == 0
    assert ("warning: rollout.group_size = 1 gives every group-relative advantage 0; nothing "
            "trains") in capsys.readouterr().err.splitlines()


def test_a_folder_that_cannot_be_created_is_one_error_line_naming_it(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    assert main(["train", f"run.output_dir={tmp_path / 'a_file'}", "run.name=run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith(f"error: cannot use {tmp_path / 'a_file' / 'run'}: ")


def _boom(*args, **kwargs):
    raise RuntimeError("boom\nsecond line")


def test_an_unexpected_error_is_one_internal_error_line_with_status_1(monkeypatch, capsys):
    monkeypatch.setattr("agentcredit.train.loop.train", _boom)
    assert main(["train"]) == 1
    assert capsys.readouterr().err.strip() == (
        "error: internal error: RuntimeError: boom (rerun with --debug for the traceback)")


@pytest.mark.parametrize("argv", [["--debug", "train"], ["train", "--debug"]])
def test_debug_shows_the_traceback_of_an_unexpected_error(argv, monkeypatch, capsys):
    monkeypatch.setattr("agentcredit.train.loop.train", _boom)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)") and "_boom" in err
    assert "RuntimeError: boom" in err and "--debug" not in err


def test_a_user_error_stays_one_line_with_debug(capsys):
    assert main(["train", "--debug", "rollout.group_sise=4"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: unknown config key 'rollout.group_sise'; did you mean 'rollout.group_size'?")


def test_config_show_prints_the_resolved_config_as_yaml_that_loads_back(tmp_path, capsys):
    import dataclasses

    from agentcredit.credit import get_estimator

    given = ["method=vict", "credit.options.backbone=gigpo", "rollout.group_size=4"]
    assert main(["config", "--show", *given]) == 0
    shown = capsys.readouterr().out
    data = yaml.safe_load(shown)
    assert data["credit"]["estimator"] == "vict" and data["rollout"]["group_size"] == 4
    options = data["credit"]["options"]
    # every VICT option and every option of its GiGPO backbone, not only the ones given
    vict, gigpo = get_estimator("vict").config_cls, get_estimator("gigpo").config_cls
    assert set(options) == {f.name for f in dataclasses.fields(vict)}
    assert set(options["backbone"]) == {"name", *(f.name for f in dataclasses.fields(gigpo))}
    assert options["budget"] == 8 and options["gamma_lambda"] == 0.5  # docs/vict.md defaults
    assert options["backbone"]["name"] == "gigpo" and options["backbone"]["step_weight"] == 1.0
    expected = config_to_dict(load_config(None, given))
    assert {k: v for k, v in data.items() if k != "credit"} == {
        k: v for k, v in expected.items() if k != "credit"}
    (tmp_path / "shown.yaml").write_text(shown)
    assert main(["config", "--show", "--config", str(tmp_path / "shown.yaml")]) == 0
    assert capsys.readouterr().out == shown


def test_config_show_takes_a_preset_and_a_model_as_train_does(capsys):
    assert main(["config", "--show", "--config", "hf", "--model", "/models/mine"]) == 0
    data = yaml.safe_load(capsys.readouterr().out)
    assert data["model"]["name"] == "/models/mine" and data["sft"]["enabled"] is False
    assert data["rollout"]["max_new_tokens"] == 512 and data["rollout"]["decoding"] == "free"


def test_config_list_into_a_pipe_that_closes_early_exits_0_quietly():
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-m", "agentcredit.cli", "config", "--list"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # `| head -1` gone before the first line is written
    err = child.stderr.read().decode()
    assert child.wait(timeout=120) == 0, err
    assert err == ""


def test_config_show_refuses_a_bad_key_in_one_line(capsys):
    assert main(["config", "--show", "rollout.group_sise=4"]) == 2
    assert capsys.readouterr().err.strip().startswith(
        "error: unknown config key 'rollout.group_sise'")


def test_config_list_prints_every_key_with_its_type_and_doc(capsys):
    from agentcredit.config import all_keys

    assert main(["config", "--list"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line and line[0] != " "}
    assert set(all_keys()) <= set(lines)
    assert lines["rollout.group_size"].split()[1] == "int"
    assert "rollouts per task" in lines["rollout.group_size"]
    assert lines["rollout.action_format"].split()[1] == "bare|tagged|raw"
    assert lines["env.alfworld.generator.max_receptacles"].split()[1:3] == ["int", "|"]
    assert "room size cap" in lines["env.alfworld.generator.max_receptacles"]
    assert "credit.options with credit.estimator=vict (or method=vict):" in out
    assert "credit.options.backbone.mode" in lines  # a backbone's option, under VICT and ADRS
    assert "``" not in out
