"""The plugin loads through verl's ``verl.plugins`` entry point in a fresh process and its
registrations are visible in verl's registries (issue 17, "plugin")."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

if importlib.util.find_spec("verl") is None:
    pytest.skip("verl 0.9 is not importable: pip install agentcredit[verl]",
                allow_module_level=True)

ROOT = Path(__file__).resolve().parents[3]

CHECK = textwrap.dedent("""
    import sys
    assert "agentcredit.integrations.verl.plugin" not in sys.modules
    import verl  # loads the verl.plugins entry points
    assert "agentcredit.integrations.verl.plugin" in sys.modules, "the plugin was not loaded"
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.trainer.ppo.v1 import get_trainer_cls
    from agentcredit.credit import estimator_names
    assert _agent_loop_registry["agentcredit"]["_target_"].endswith("AgentCreditLoop")
    assert get_trainer_cls("agentcredit").__name__ == "AgentCreditTrainer"
    for name in estimator_names():
        get_adv_estimator_fn("agentcredit." + name)
    print("ok", len(estimator_names()))
""")


def test_import_verl_loads_the_entry_point_and_registers_everything(tmp_path):
    # the entry point exactly as pyproject declares it, in a dist-info of its own, so the
    # test does not depend on when the project was last pip-installed
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = declared["project"]["entry-points"]["verl.plugins"]["agentcredit"]
    info = tmp_path / "agentcredit_verl_plugin-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agentcredit-verl-plugin\n"
                                   "Version: 0\n")
    (info / "entry_points.txt").write_text(f"[verl.plugins]\nagentcredit = {target}\n")
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "auto",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run([sys.executable, "-c", CHECK], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok")


def test_importing_agentcredit_never_imports_verl():
    done = subprocess.run([sys.executable, "-c", ("import agentcredit, agentcredit.cli, "
                           "agentcredit.integrations.verl.rows, "
                           "agentcredit.integrations.verl.episode, sys; "
                           "assert 'verl' not in sys.modules")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
