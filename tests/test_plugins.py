"""Plug-ins by entry point (``plugins.py``): a package on the path with an
``agentcredit.environments`` or ``agentcredit.estimators`` entry point is registered like a
built-in, and one that fails to import is one ``error:`` line naming its package. Each test
puts a small distribution (a module and its ``.dist-info``) on a temporary path and runs the
CLI in a fresh interpreter, since the config's ``env`` section is built from the registry
when it is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentcredit import plugins
from agentcredit.plugins import PluginError, load_group, load_reference

ENVIRONMENT = '''
from dataclasses import dataclass

from agentcredit.envs.suites import register_environment


@dataclass
class LockOptions:
    """Options of the lock."""

    digits: int = 3
    """How many digits the code has."""


class LockSuite:
    splits = ("train", "test")
    validation_splits = ("test",)

    def __init__(self, options, games):
        self.options = options


register_environment("lock", LockSuite, options=LockOptions,
                     options_doc="The lock (env=lock): its code length.")
'''

ESTIMATOR = '''
from dataclasses import dataclass

import torch

from agentcredit.credit import CreditResult, register_estimator


@dataclass(frozen=True)
class ZeroConfig:
    """No options."""


@register_estimator("zero", ZeroConfig)
def zero(batch, config):
    return CreditResult(step_advantages=torch.zeros(batch.num_steps))
'''


def distribution(root: Path, name: str, module: str, code: str, group: str) -> Path:
    """A distribution ``name`` with ``module`` (``code``) and one entry point of ``group``."""
    (root / f"{module}.py").write_text(textwrap.dedent(code))
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{module} = {module}\n")
    return root


def cli(path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), *sys.path])}
    return subprocess.run([sys.executable, "-m", "agentcredit.cli", *args], env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def lock(tmp_path) -> Path:
    return distribution(tmp_path, "lock-env", "lock", ENVIRONMENT, plugins.ENVIRONMENTS)


def test_a_plugin_environments_options_are_listed_and_shown_like_a_built_ins(lock):
    listed = cli(lock, "config", "--list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    assert "The lock (env=lock): its code length." in rows["env.lock"]
    assert "How many digits the code has." in rows["env.lock.digits"]
    assert " lock" in rows["env.name"]
    shown = cli(lock, "config", "--show", "env=lock", "env.lock.digits=5")
    assert shown.returncode == 0, shown.stderr
    assert "  name: lock\n" in shown.stdout and "  lock:\n    digits: 5\n" in shown.stdout
    assert "alfworld:" not in shown.stdout  # the selected environment's options only


def test_a_misspelt_plugin_option_is_named_with_the_key_it_meant(lock):
    done = cli(lock, "config", "--show", "env=lock", "env.lock.digit=5")
    assert done.returncode == 2
    assert done.stderr.strip() == ("error: unknown config key 'env.lock.digit'; did you mean "
                                   "'env.lock.digits'?")


def test_a_plugin_that_fails_to_import_is_one_error_line_naming_its_package(tmp_path):
    broken = distribution(tmp_path, "lock-env", "lock", "import no_such_dependency\n",
                          plugins.ENVIRONMENTS)
    for args in (["config", "--list"], ["train", "--help"]):
        done = cli(broken, *args)
        assert done.returncode == 2, args
        assert done.stderr.strip().splitlines() == [(
            "error: plug-in package 'lock-env' failed to load its agentcredit.environments "
            "entry point lock = lock: ModuleNotFoundError: No module named "
            "'no_such_dependency'; fix the package or uninstall it (pip uninstall lock-env)")]


#: the lock registered under a built-in's name
ALFWORLD_AGAIN = ENVIRONMENT.replace('register_environment("lock"',
                                     'register_environment("alfworld"')


def test_a_plugin_registering_a_built_in_environment_is_one_error_line_naming_both(tmp_path):
    path = distribution(tmp_path, "alf-again", "alf_again", ALFWORLD_AGAIN, plugins.ENVIRONMENTS)
    for args in (["config", "--list"], ["train", "--config", "quick"]):
        done = cli(path, *args)
        assert done.returncode == 2, args
        assert done.stderr.strip().splitlines() == [(
            "error: environment 'alfworld' is registered twice: first by agentcredit's "
            "built-in agentcredit.envs.suites.AlfWorldSuite, then by plug-in package "
            "'alf-again' (entry point alf_again = alf_again in agentcredit.environments); "
            "rename the second one's environment (its register_environment('alfworld', ...) "
            "call) and select it with env=NEW_NAME")], args


def test_a_plugin_estimator_is_registered_by_its_entry_point(tmp_path):
    path = distribution(tmp_path, "zero-estimator", "zero_estimator", ESTIMATOR,
                        plugins.ESTIMATORS)
    done = cli(path, "conformance", "zero")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "zero: conforms (4 checks, 0 failures)"
    listed = cli(path, "config", "--show", "credit.estimator=zero")
    assert listed.returncode == 0 and "estimator: zero" in listed.stdout


def test_load_group_names_the_failing_entry_point_and_tries_again_next_time(tmp_path,
                                                                            monkeypatch):
    distribution(tmp_path, "lock-env", "lock_broken", "raise RuntimeError('no lock')\n",
                 "agentcredit.test_group")
    monkeypatch.syspath_prepend(str(tmp_path))
    for _ in range(2):  # a failed group is not marked loaded
        with pytest.raises(PluginError, match=r"'lock-env' failed to load its "
                                              r"agentcredit.test_group entry point lock_broken = "
                                              r"lock_broken: RuntimeError: no lock"):
            load_group("agentcredit.test_group")
    plugins.reset("agentcredit.test_group")


def test_a_hook_reference_that_does_not_import_names_what_it_was_for():
    with pytest.raises(PluginError, match=r"environment 'lock''s solver: cannot load "
                                          r"'lock.nowhere:distance'"):
        load_reference("lock.nowhere:distance", "environment 'lock''s solver")
