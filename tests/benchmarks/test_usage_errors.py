"""The benchmark scripts keep the CLI's exit-code rule (issue 65, item 5): a bad argument is one
``error:`` line on stderr and exit status 2, refused before any work; a bug is 1 with its
traceback; an interrupt 130. Each script below runs as a user runs it, one bad argument each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentcredit.config import ConfigError
from bench_common import result_name, run_script, write_result

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args], capture_output=True,
                          text=True, timeout=120, check=False, cwd=BENCHMARKS.parent)


def refused(done: subprocess.CompletedProcess, says: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert (done.returncode, done.stdout, len(lines)) == (2, "", 1), done.stderr
    assert lines[0].startswith("error: ") and says in lines[0], lines[0]


@pytest.mark.parametrize(("argv", "says"), [
    (["--workers", "0"], "--workers 0: it must be at least 1"),
    (["--groups", "abc"], "--groups 'abc': not a number N"),
    (["--envs", "foo"], "--envs: ['foo'] unknown"),
    (["--boots", "x"], "argument --boots: invalid int value: 'x'"),
    (["rollout.group_sise=4"], "unknown config key 'rollout.group_sise'"),
    (["--figure", "--name", "no_such_result"], "--figure: cannot read the cells of"),
])
def test_credit_regimes_refuses_a_bad_argument_in_one_line_with_status_2(argv, says):
    refused(script("credit_regimes.py", *argv), says)


def test_credit_regimes_checks_its_overrides_before_it_starts_a_worker(monkeypatch):
    import credit_regimes

    def no_workers(*args):
        raise AssertionError("a worker pool started before the overrides were checked")

    monkeypatch.setattr(credit_regimes.multiprocessing, "get_context", no_workers)
    monkeypatch.setattr(sys, "argv", ["credit_regimes.py", "rollout.group_sise=4"])
    with pytest.raises(ConfigError, match="unknown config key 'rollout.group_sise'"):
        credit_regimes.main()


@pytest.mark.parametrize(("name", "argv", "result"), [
    ("credit_regimes.py", [], "ABSOLUTE"),
    ("learning_alfworld.py", [], "sub/x"),
    ("real_shape.py", [], "ABSOLUTE"),
    ("seeded_metrics.py", ["--baseline", "HEAD"], "../x"),
])
def test_a_result_name_with_a_folder_is_refused_before_any_work(tmp_path, name, argv, result):
    result = str(tmp_path / "escaped") if result == "ABSOLUTE" else result
    refused(script(name, *argv, "--name", result), "must be a plain file name")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "../x", "a\\b", "line\nbreak"])
def test_write_result_writes_only_a_plain_file_name_inside_results(name, monkeypatch, tmp_path):
    monkeypatch.setattr("bench_common.RESULTS", tmp_path / "results")
    with pytest.raises(ValueError, match="must be a plain file name"):
        write_result(name, {}, {}, {}, "", quick=True)
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").iterdir())
    assert result_name("credit_regimes_v2") == "credit_regimes_v2"


def _raises(error: BaseException):
    def main():
        raise error
    return main


@pytest.mark.parametrize(("error", "status", "says"), [
    (ConfigError("optim.lr = -1 must be > 0"), 2, "error: optim.lr = -1 must be > 0\n"),
    (SystemExit("--workers 0: it must be at least 1"), 2,
     "error: --workers 0: it must be at least 1\n"),
    (KeyboardInterrupt(), 130, "interrupted\n"),
])
def test_run_script_gives_usage_errors_2_and_an_interrupt_130(error, status, says, capsys):
    with pytest.raises(SystemExit) as stop:
        run_script(_raises(error))
    assert (stop.value.code, capsys.readouterr().err) == (status, says)


def test_run_script_leaves_a_bug_its_traceback_and_status_1():
    with pytest.raises(RuntimeError, match="a bug"):
        run_script(_raises(RuntimeError("a bug")))  # Python prints it and exits 1
