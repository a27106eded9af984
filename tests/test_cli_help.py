"""First contact: ``agentcredit --help`` and every command's help are plain text with examples,
explain key=value settings, list every method name, and load no torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from agentcredit.cli import main
from agentcredit.config import METHODS
from agentcredit.plugins import listed_estimator_names

COMMANDS = ([], ["train"], ["eval"], ["audit"], ["config"], ["conformance"])


def _help(command: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "agentcredit")
def test_every_help_is_plain_text_with_examples_settings_and_methods(command, capsys):
    text = _help(command, capsys)
    assert "`" not in text  # no reStructuredText or Markdown markup
    assert f"examples:\n  agentcredit {command[0] if command else ''}".rstrip() in text
    assert "settings (key=value):" in text and "rollout.group_size=4" in text
    assert "agentcredit config --list" in text
    for name in (*listed_estimator_names(), *METHODS):
        assert name in text, name
    assert max(len(line) for line in text.splitlines()) <= 80


def test_the_torch_free_estimator_list_names_exactly_the_registered_estimators():
    # the package's own registry, without the estimators this test session registers
    script = ("import json; from agentcredit.credit import estimator_names; "
              "from agentcredit.plugins import listed_estimator_names; "
              "print(json.dumps([listed_estimator_names(), estimator_names()]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    listed, registered = json.loads(done.stdout)
    assert listed == registered


def test_the_help_lists_the_presets_as_the_methods_that_are_not_estimators(capsys):
    text = " ".join(_help([], capsys).split())
    presets = [name for name in METHODS if name not in listed_estimator_names()]
    assert "rlsd" not in presets and "skill_grpo" in presets
    assert f"presets: {', '.join(presets)} (skill_grpo_star is also spelled skill_grpo*)" in text


def test_train_help_names_what_resume_accepts(capsys):
    text = " ".join(_help(["train"], capsys).split())
    assert ("It accepts only settings that keep the run's meaning: run.updates, run.eval_every, "
            "run.checkpoint_every, run.keep_checkpoints, run.progress, run.threads, run.device, "
            "run.save_rollouts, run.keep_rollouts, run.tensorboard, run.wandb, "
            "eval.probes.") in text


def test_no_help_imports_torch(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from agentcredit.cli import main
        for command in {list(COMMANDS)!r}:
            try:
                main([*command, "--help"])
            except SystemExit as done:
                assert done.code == 0, (command, done.code)
        print("torch loaded:", "torch" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("usage: agentcredit") == len(COMMANDS)
    assert done.stdout.strip().endswith("torch loaded: False")


def test_audit_help_and_the_env_name_doc_list_every_registered_environment(capsys):
    # the package's own registry, without the suites this test session registers
    script = ("import json; from agentcredit.envs.suites import env_suite_names; "
              "print(json.dumps(env_suite_names()))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    names = json.loads(done.stdout)
    assert {"alfworld", "webshop", "searchqa", "tau-retail", "tau-airline"} <= set(names)
    audit = " ".join(_help(["audit"], capsys).split())
    assert main(["config", "--list"]) == 0
    (env_name,) = [line for line in capsys.readouterr().out.splitlines()
                   if line.startswith("env.name ")]
    for name in names:
        assert f" {name}," in audit or f" {name} " in audit, name
        assert f" {name}," in env_name or f" {name} " in env_name, name


def test_audit_help_explains_every_column_of_the_table(capsys):
    from agentcredit.train.evaluation.audit import AUDIT_LEGEND

    text = _help(["audit"], capsys)
    legend = text.split("columns (also printed under the table):\n", 1)[1]
    starts = [line.split("  ")[1] for line in legend.splitlines()
              if line.startswith("  ") and not line.startswith("   ")][:len(AUDIT_LEGEND)]
    assert starts == [column for column, _ in AUDIT_LEGEND]
