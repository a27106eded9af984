"""The ``agentcredit`` command line: train, resume, eval, and one-line errors."""

from __future__ import annotations

import pytest
import yaml

from agentcredit.cli import main
from agentcredit.train.config import config_to_dict, load_config

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
    assert f"run directory: {(tmp_path / 'cli').resolve()}" in out
    assert "success before RL (after SFT): " in out
    assert "success after 1 updates: " in out


def test_resume_continues_a_run_and_eval_reads_its_latest_checkpoint(config_file, tmp_path,
                                                                     capsys):
    run_dir = tmp_path / "cli"
    assert main(["train", "--config", str(config_file), f"run.output_dir={tmp_path}",
                 "run.name=cli"]) == 0
    assert main(["train", "--resume", str(run_dir), "run.updates=2"]) == 0
    assert "success after 2 updates" in capsys.readouterr().out
    assert (run_dir / "checkpoints" / "update_00002").is_dir()
    assert main(["eval", "--checkpoint", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert '"eval/valid_seen/success"' in out and "success: " in out


@pytest.mark.parametrize("override, message", [
    ("rollout.group_sise=4",
     "error: unknown config key 'rollout.group_sise'; did you mean 'rollout.group_size'?"),
    ("rollout.temperature=-2",
     "error: rollout.temperature = -2.0 is out of range; allowed [0.0, inf]"),
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
    ("run.seed=-1", "error: run.seed = -1 is out of range; allowed [0, inf]"),
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
