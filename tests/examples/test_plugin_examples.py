"""The example plug-ins (``examples/plugin_env``: the lamp panel; ``examples/plugin_estimator``:
``last_step_bonus``) installed as a user installs them, then run through ``train``,
``audit``, ``credit-check``, ``report``, ``conformance`` and the verl launch's ``--dry-run``
with no file of agentcredit edited.

Installed small and offline: ``pip install --no-deps --no-build-isolation --no-index
--target DIR`` of a copy of each example (the wheel and its ``.dist-info`` with the entry
points land in DIR; the example folders stay clean), and every command runs in a fresh
interpreter with DIR on its path after agentcredit's own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TINY = (
    "run.progress=false", "run.threads=1", "sft.cache=false", "rollout.temperature=1.0",
    "rollout.decoding=free", "rollout.history_window=1", "model.tiny.hidden_size=32",
    "model.tiny.num_hidden_layers=1", "model.tiny.num_attention_heads=2",
    "model.tiny.num_key_value_heads=1", "model.tiny.intermediate_size=64",
    "model.tiny.max_position_embeddings=512", "rollout.max_steps=6", "rollout.max_new_tokens=6",
    "env=lamps", "env.train_games_per_type=4", "env.valid_games_per_type=2",
    "env.pool_games_per_type=0", "run.updates=1", "sft.epochs=5", "sft.batch_size=4",
    "sft.lr=0.01", "rollout.group_size=2", "rollout.tasks_per_update=2",
    "optim.micro_batch_size=4",
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """``(work folder, environment)``: both examples installed into ``work/site``."""
    work = tmp_path_factory.mktemp("plugins")
    for name in ("plugin_env", "plugin_estimator"):
        shutil.copytree(EXAMPLES / name, work / name)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "--target", str(work / "site"),
                    str(work / "plugin_env"), str(work / "plugin_estimator")],
                   check=True, capture_output=True, timeout=120)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path, str(work / "site")])}
    return work, env


def run(installed, *args: str, module: str = "agentcredit.cli") -> str:
    work, env = installed
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_examples_stay_small():
    env_modules = sorted(p.name for p in (EXAMPLES / "plugin_env" / "lamps").glob("*.py"))
    assert env_modules == ["__init__.py", "engine.py", "plugin.py"]  # at most 3 modules
    assert sorted(p.name for p in (EXAMPLES / "plugin_estimator").glob("*.py")) == \
        ["last_step_bonus.py"]


def test_the_estimator_example_is_the_docs_recipe():
    doc = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    recipe = doc.split("## Write an estimator (one module)\n", 1)[1].split("```python\n", 1)[1]
    module = (EXAMPLES / "plugin_estimator" / "last_step_bonus.py").read_text(encoding="utf-8")
    assert module.endswith(recipe.split("```", 1)[0])


@pytest.mark.slow  # about 35 s on 2 cores: five commands, each a fresh interpreter
def test_the_installed_plugins_train_audit_credit_check_report_and_conform(installed):
    work, _ = installed
    out = run(installed, "train", *TINY, "credit.estimator=last_step_bonus",
              f"run.output_dir={work / 'runs'}", "run.name=lamps")
    assert "eval after update 1" in out
    config = (work / "runs" / "lamps" / "config.yaml").read_text()
    assert "name: lamps" in config and "estimator: last_step_bonus" in config
    audit = run(installed, "audit", "--env", "lamps", "--copies", "2",
                "env.valid_games_per_type=2")
    expert = next(line for line in audit.splitlines() if line.startswith("| expert |"))
    cells = [c.strip() for c in expert.strip("|").split("|")]
    assert cells[3:5] == ["100.0", "100.0"]  # F reproduces V on every rollout and mutant
    assert cells[12] == "100.0"  # every atom is Level 0, derived from the goal state
    run(installed, "credit-check", "--checkpoint", "runs/lamps", "--groups", "2",
        "--truths", "solver", "--boots", "20", "--methods", "grpo,vict,last_step_bonus",
        "-o", "credit.json")
    checked = json.loads((work / "credit.json").read_text())
    assert "last_step_bonus" in json.dumps(checked)
    if importlib.util.find_spec("plotly") is not None:
        assert "wrote" in run(installed, "report", "runs/lamps", "-o", "report.html")
    conformance = run(installed, "conformance", "last_step_bonus")
    assert conformance.splitlines()[-1] == "last_step_bonus: conforms (7 checks, 0 failures)"


@pytest.mark.slow  # about 13 s: verl's import and Hydra compose
@pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs the verl extra")
def test_the_installed_plugins_pass_the_verl_dry_run(installed):
    resolved = run(installed, "lamps", "grpo", "--dry-run", "credit.estimator=last_step_bonus",
                   module="agentcredit.integrations.verl.launch")
    assert "adv_estimator: agentcredit.last_step_bonus" in resolved
    assert "rollout.max_steps=12" in resolved  # the plug-in's step limit
