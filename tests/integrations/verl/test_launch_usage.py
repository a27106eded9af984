"""The verl launcher's usage errors speak like the ``agentcredit`` CLI (issue 64, item 5;
issue 65, item 5): one ``error:`` line and exit status 2, run as the module a user runs. None
of these needs verl: each stops before it is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentcredit.integrations.verl import launch


def launched(*args: str, path: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m agentcredit.integrations.verl.launch ARGS`` with ``path`` on PYTHONPATH."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), *sys.path])
    return subprocess.run([sys.executable, "-m", "agentcredit.integrations.verl.launch", *args],
                          env=env, capture_output=True, text=True, timeout=300, check=False)


def broken_environment_plugin(root: Path) -> Path:
    """A distribution ``lock-env`` whose ``agentcredit.environments`` entry point fails to
    import."""
    (root / "lock.py").write_text("import no_such_dependency\n")
    info = root / "lock-env-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lock-env\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[agentcredit.environments]\nlock = lock\n")
    return root


def test_a_plugin_that_fails_to_import_is_the_clis_one_error_line_and_status_2(tmp_path):
    done = launched("alfworld", "grpo", "--dry-run", path=broken_environment_plugin(tmp_path))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.strip().splitlines() == [(
        "error: plug-in package 'lock-env' failed to load its agentcredit.environments "
        "entry point lock = lock: ModuleNotFoundError: No module named "
        "'no_such_dependency'; fix the package or uninstall it (pip uninstall lock-env)")]


@pytest.mark.parametrize(("argv", "named"), [
    (["alfworld", "ppo"], "METHOD = 'ppo'"),
    (["minecraft", "grpo"], "ENV = 'minecraft'"),
    (["alfworld"], "usage: launch.sh ENV METHOD"),
    (["alfworld", "grpo", "--gpus", "4"], "unknown option --gpus"),
    (["alfworld", "grpo", "rollout.nope=1"], "unknown config key 'rollout.nope'"),
])
def test_a_bad_argument_to_the_module_is_one_error_line_and_status_2(argv, named):
    done = launched(*argv)
    assert (done.returncode, done.stdout) == (2, "")
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], lines


def test_any_registered_estimator_is_a_method_setting_credit_estimator():
    planned = launch.plan(["alfworld", "rloo"])
    assert planned.config.credit.estimator == "rloo"
    assert "credit.estimator=rloo" in planned.agentcredit
    assert "algorithm.adv_estimator=agentcredit.rloo" in planned.verl


def test_help_says_how_to_launch_a_plugin_estimator(capsys):
    assert launch.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(launch.USAGE)
    assert "registered estimator" in out and "credit.estimator=METHOD" in out
