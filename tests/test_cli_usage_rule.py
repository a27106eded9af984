"""Every command-line entry point but the benchmarks (tests/benchmarks/test_usage_errors.py walks
those) keeps one exit-code rule (issue 65, item 5): a usage or bad-input error is one
``error:`` line on stderr and exit status 2, before any work (nothing written).

Each ``agentcredit`` subcommand is found in the parser, so a new one is walked too, and
``python -m agentcredit.integrations.verl.launch``. They run in this process: the
``agentcredit`` script is ``sys.exit(main())`` and the launcher's ``__main__`` is
``sys.exit(main())``, so ``main``'s return (or the ``SystemExit`` argparse raises) is the
status a user sees; one case runs as a real process to show that."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from agentcredit.cli import _parser, main
from agentcredit.integrations.verl import launch


def subcommands() -> list[str]:
    (commands,) = [action for action in _parser()._actions
                   if isinstance(action, argparse._SubParsersAction)]
    return sorted(commands.choices)


#: one bad argument per subcommand, with what its ``error:`` line says (MISSING: a path that
#: does not exist)
BAD = {
    "audit": (["--copies", "0"], "--copies 0: need at least 1 rollout per task"),
    "config": (["--show", "rollout.group_sise=4"], "unknown config key 'rollout.group_sise'"),
    "conformance": (["no_such_estimator"], "unknown estimator 'no_such_estimator'"),
    "credit-check": (["--checkpoint", "MISSING"], "MISSING does not exist"),
    "eval": (["--checkpoint", "MISSING"], "MISSING does not exist"),
    "report": (["MISSING"], "no run directory to report: MISSING does not exist"),
    "train": (["rollout.group_sise=4"], "unknown config key 'rollout.group_sise'"),
}


@pytest.fixture
def sandbox(tmp_path, monkeypatch) -> Path:
    """The working and temporary folders of the command, empty to start."""
    for folder in ("cwd", "tmp"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path


def status_of(entry, argv: list[str]):
    try:
        return entry(argv)
    except SystemExit as stop:
        return stop.code


def assert_refused(status, out: str, err: str, says: str = "") -> None:
    lines = err.strip().splitlines()
    assert (status, out, len(lines)) == (2, "", 1), err
    assert lines[0].startswith("error: ") and says in lines[0], lines[0]


def test_every_subcommand_has_a_bad_argument_case():
    assert sorted(BAD) == subcommands()


@pytest.mark.parametrize("command", subcommands())
def test_a_bad_argument_to_a_subcommand_is_one_error_line_and_status_2(command, sandbox,
                                                                       capsys):
    argv, says = BAD[command]
    missing = str(sandbox / "missing")
    status = status_of(main, [command, *(missing if a == "MISSING" else a for a in argv)])
    assert_refused(status, *capsys.readouterr(), says.replace("MISSING", missing))
    assert list(sandbox.glob("*/*")) == []


@pytest.mark.parametrize("command", subcommands())
def test_an_unknown_option_to_a_subcommand_is_one_error_line_and_status_2(command, sandbox,
                                                                          capsys):
    status = status_of(main, [command, "--no-such-option"])
    assert_refused(status, *capsys.readouterr())
    assert list(sandbox.glob("*/*")) == []


@pytest.mark.parametrize(("argv", "says"), [
    (["alfworld", "nope"], "METHOD = 'nope'"),
    (["minecraft", "grpo"], "ENV = 'minecraft'"),
    (["alfworld", "grpo", "--no-such-option"], "unknown option --no-such-option"),
    (["alfworld", "grpo", "rollout.group_sise=4"], "unknown config key 'rollout.group_sise'"),
])
def test_a_bad_argument_to_the_verl_launcher_is_one_error_line_and_status_2(argv, says,
                                                                            sandbox, capsys):
    assert_refused(status_of(launch.main, argv), *capsys.readouterr(), says)
    assert list(sandbox.glob("*/*")) == []


def test_the_agentcredit_script_run_as_a_process_exits_as_it_does_here(tmp_path):
    script = "import sys; from agentcredit.cli import main; sys.exit(main())"  # pip's wrapper
    done = subprocess.run([sys.executable, "-c", script, "config", "--show",
                           "rollout.group_sise=4"], capture_output=True, text=True, timeout=120,
                          check=False, cwd=tmp_path)
    assert_refused(done.returncode, done.stdout, done.stderr,
                   "unknown config key 'rollout.group_sise'")
