"""The benchmark scripts keep the CLI's exit-code rule (issue 65, item 5): a bad argument is one
``error:`` line on stderr and exit status 2, refused before any work (nothing written); a bug is
1 with its traceback, a failed child 1 with its message; an interrupt (Ctrl-C) 130.

Every ``benchmarks/*.py`` script but the libraries is found by globbing, so a new one is walked
too. Each runs in this process through its own ``__main__`` block (``runpy``): the status is
the one ``python benchmarks/NAME.py`` exits with (test_credit_regimes.py and test_real_shape.py
run a script as a real process; each costs this machine some 15 s of imports)."""

from __future__ import annotations

import argparse
import json
import runpy
import signal
import sys
import tempfile
from pathlib import Path

import pytest

import bench_common
from agentcredit.config import ConfigError
from bench_common import BenchmarkFailed, fuzz_results, result_name, run_script, write_result

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: the modules of benchmarks/ that are not scripts
LIBRARIES = {"bench_common.py"}
SCRIPTS = sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in LIBRARIES)
#: seconds a refused script may take here; past them it has started its work
REFUSAL_S = 60

#: one bad argument per case beyond the unknown option every script gets, with what its
#: ``error:`` line says; MISSING, FILE, FULL, ABSOLUTE and MODEL are filled in by ``_argv``
BAD = {
    "adrs_overhead.py": [(["--qwen-hidden", "252"], "it must be a multiple of 8"),
                         (["--qwen-vocab", "512"], "512: it must be at least 4096"),
                         (["--threads", "0"], "--threads: 0: it must be at least 1")],
    "alfworld_env.py": [(["--only-fuzz"], "alfworld_env.json does not exist: run the whole")],
    "credit_accuracy.py": [(["--groups", "0"], "groups = 0; it must be from 1"),
                           (["--workers", "3"], "workers = 3; it must be 1 or 2"),
                           (["--env", "minecraft"], "'minecraft' is not a registered environment"),
                           (["rollout.group_sise=4"], "unknown config key 'rollout.group_sise'"),
                           (["--model", "MISSING"], "is not a model folder (no config.json)")],
    "credit_regimes.py": [(["--workers", "0"], "--workers 0: it must be at least 1"),
                          (["--groups", "abc"], "--groups 'abc': not a number N"),
                          (["--envs", "foo"], "--envs: ['foo'] unknown"),
                          (["--boots", "x"], "argument --boots: invalid int value: 'x'"),
                          (["rollout.group_sise=4"], "unknown config key 'rollout.group_sise'"),
                          (["--figure", "--name", "no_such_result"],
                           "--figure: cannot read the cells of"),
                          (["--name", "ABSOLUTE"], "must be a plain file name")],
    "gpu_check.py": [(["--peak-tflops", "0"], "0: it must be a finite number above 0"),
                     (["--name", "a/b"], "must be a plain file name")],
    "learning_alfworld.py": [(["--seeds", "a"], "'a' is not a comma-separated list"),
                             (["--seeds", "0,0"], "each seed must be at least 0, and given once"),
                             (["--updates", "0"], "--updates: 0: it must be at least 1"),
                             (["--methods", "vict,nope"], "method = 'nope' is not a method"),
                             (["rollout.group_size=0"], "rollout.group_size = 0 is out of range"),
                             (["--output-dir", "FILE"], "exists and is not a folder"),
                             (["--name", "sub/x"], "must be a plain file name")],
    "level0_tau.py": [(["--fuzz", "-1"], "--fuzz: -1: it must be at least 0")],
    "main_job.py": [(["--source", "MISSING"], "is not a project tree"),
                    (["--reuse-venv", "MISSING"], "is not a virtual environment")],
    "memory_estimate.py": [(["--case", "nope", "x"], "argument --case: invalid choice"),
                           (["stray"], "--case NAME and FOLDER go together")],
    "ppo_silent_rows.py": [(["--model", "MISSING"], "is not a model folder"),
                           (["--model", "MODEL", "rollout.group_sise=4"],
                            "unknown config key 'rollout.group_sise'"),
                           (["--model", "MODEL", "run.device=tpu9"], "is not a torch device")],
    "prefix_tree_learning.py": [(["--seeds", "x"], "'x' is not a comma-separated list"),
                                (["--workers", "0"], "--workers: 0: it must be at least 1"),
                                (["rollout.group_sise=4"],
                                 "unknown config key 'rollout.group_sise'")],
    "prompt_cache.py": [(["--model", "FILE"], "is not a model folder"),
                        (["--model", "MODEL", "--threads", "0"], "it must be at least 1")],
    "real_shape.py": [(["--name", "ABSOLUTE"], "must be a plain file name"),
                      (["--tasks", "0"], "rollout.tasks_per_update = 0 is out of range"),
                      (["--device", "tpu9"], "run.device = 'tpu9' is not a torch device"),
                      (["--updates", "x"], "'x' is not a whole number")],
    "report_size.py": [(["--updates", "0"], "--updates: 0: it must be at least 1"),
                       (["--keep", "FULL"], "exists and is not an empty folder")],
    "sampler_cost.py": [(["--baseline", "no-such-revision"], "is not a commit of"),
                        (["--baseline", "HEAD", "--repeats", "0"], "it must be at least 1")],
    "seeded_metrics.py": [(["--baseline", "HEAD", "--name", "../x"], "plain file name"),
                          (["--baseline", "no-such-revision"], "is not a commit of")],
    "sft_layouts.py": [(["--pairs", "0"], "--pairs: 0: it must be at least 1"),
                       (["--epochs", "0"], "0: it must be a finite number above 0"),
                       (["--epochs", "nan"], "nan: it must be a finite number above 0"),
                       (["--model", "MISSING"], "is not a model folder")],
    "trainer_throughput.py": [(["--model", "MISSING"], "is not a model folder"),
                              (["--model", "MODEL", "--baseline", "no-such-revision"],
                               "is not a commit of"),
                              (["--model", "MODEL", "--sft-epochs", "-1"],
                               "-1: it must be a finite number of at least 0"),
                              (["--model", "MODEL", "--hcapo", "rollout.group_sise=4"],
                               "unknown config key 'rollout.group_sise'")],
    "vict_overhead.py": [(["--updates", "0"], "--updates: 0: it must be at least 1"),
                         (["--model", "FULL"], "is not a model folder")],
    "webshop_env.py": [(["--only-fuzz", "--quick"],
                        "webshop_env.quick.json does not exist: run the whole")],
}


#: bench_common's functions that do a benchmark's work: none may run for a refused argument
WORK = ("sft_start", "run_method", "start_evaluation", "fuzz_figures", "merge_fuzz",
        "write_result")


@pytest.fixture
def sandbox(tmp_path, monkeypatch) -> Path:
    """Everywhere a script run here could write: its working folder, the temporary folder
    and ``benchmarks/results/`` all lie under the returned folder, empty to start; and
    ``WORK`` fails the test if called."""
    box = tmp_path / "sandbox"
    for folder in ("cwd", "tmp", "results"):
        (box / folder).mkdir(parents=True)
    monkeypatch.chdir(box / "cwd")
    monkeypatch.setattr(tempfile, "tempdir", str(box / "tmp"))
    monkeypatch.setattr(bench_common, "RESULTS", box / "results")
    monkeypatch.setattr(sys, "path", list(sys.path))  # some scripts put tests/ folders on it
    for work in WORK:
        monkeypatch.setattr(bench_common, work, _tripwire(work))
    return box


def _tripwire(work: str):
    def began(*args, **kwargs):
        raise AssertionError(f"bench_common.{work} ran before the bad argument was refused")
    return began


def written(box: Path) -> list[str]:
    """What lies inside the sandbox's folders."""
    return sorted(str(p.relative_to(box)) for p in box.glob("*/**/*"))


def _argv(argv: list[str], tmp_path: Path, model: Path) -> list[str]:
    (tmp_path / "a_file").write_text("not a folder")
    return [{"MISSING": str(tmp_path / "missing"), "FILE": str(tmp_path / "a_file"),
             "FULL": str(BENCHMARKS), "ABSOLUTE": str(tmp_path / "escaped"),
             "MODEL": str(model)}.get(arg, arg) for arg in argv]


def run_in_process(name: str, argv: list[str], monkeypatch, capsys) -> tuple[object, str, str]:
    """``python benchmarks/NAME ARGV`` run here: its exit status, stdout and stderr."""
    monkeypatch.setattr(sys, "argv", [str(BENCHMARKS / name), *argv])

    def working(*_):
        raise AssertionError(f"{name} {argv} still runs after {REFUSAL_S} s: its work began "
                             "before the argument was checked")

    previous = signal.signal(signal.SIGALRM, working)
    signal.alarm(REFUSAL_S)
    try:
        runpy.run_path(str(BENCHMARKS / name), run_name="__main__")
    except SystemExit as stop:  # run_script always ends in sys.exit
        status = stop.code
    except KeyboardInterrupt:  # else pytest would take it for the user's and stop the session
        pytest.fail(f"{name}: Ctrl-C ended in a traceback; run its main with run_script")
    else:
        pytest.fail(f"{name} {argv} ended without sys.exit; run its main with run_script")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_refused(status, out: str, err: str, says: str = "") -> None:
    lines = err.strip().splitlines()
    assert (status, out, len(lines)) == (2, "", 1), err
    assert lines[0].startswith("error: ") and says in lines[0], lines[0]


def test_every_script_is_walked_and_every_case_names_a_script():
    assert "learning_alfworld.py" in SCRIPTS and "bench_common.py" not in SCRIPTS
    assert set(BAD) <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_unknown_option_is_one_error_line_and_status_2_before_any_work(
        name, sandbox, monkeypatch, capsys):
    assert_refused(*run_in_process(name, ["--no-such-option"], monkeypatch, capsys))
    assert written(sandbox) == []


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_interrupt_is_status_130(name, sandbox, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", interrupted)
    assert run_in_process(name, [], monkeypatch, capsys) == (130, "", "interrupted\n")


@pytest.mark.parametrize(("name", "argv", "says"),
                         [(name, argv, says) for name, cases in BAD.items()
                          for argv, says in cases])
def test_a_bad_argument_is_one_error_line_and_status_2_before_any_work(
        name, argv, says, sandbox, tmp_path, fake_model_dir, monkeypatch, capsys):
    argv = _argv(argv, tmp_path, fake_model_dir)
    assert_refused(*run_in_process(name, argv, monkeypatch, capsys), says)
    assert written(sandbox) == []


def test_credit_regimes_checks_its_overrides_before_it_starts_a_worker(monkeypatch):
    import credit_regimes

    def no_workers(*args):
        raise AssertionError("a worker pool started before the overrides were checked")

    monkeypatch.setattr(credit_regimes.multiprocessing, "get_context", no_workers)
    monkeypatch.setattr(sys, "argv", ["credit_regimes.py", "rollout.group_sise=4"])
    with pytest.raises(ConfigError, match="unknown config key 'rollout.group_sise'"):
        credit_regimes.main()


@pytest.mark.parametrize(("payload", "says"), [
    ("{not json", "is not a readable results file"),
    (json.dumps({"metrics": {}, "config": {}, "targets": {}}), "lacks a benchmark's config"),
    (json.dumps([1, 2]), "lacks a benchmark's config"),
])
def test_only_fuzz_refuses_a_results_file_it_could_not_merge_into(payload, says, sandbox):
    (sandbox / "results" / "webshop_env.json").write_text(payload)
    with pytest.raises(SystemExit, match=says):
        fuzz_results("webshop_env.json")


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
    (BenchmarkFailed("`make run` failed with exit status 2\nits last lines"), 1,
     "error: `make run` failed with exit status 2\nits last lines\n"),
    (KeyboardInterrupt(), 130, "interrupted\n"),
])
def test_run_script_gives_usage_errors_2_a_failed_child_1_and_an_interrupt_130(
        error, status, says, capsys):
    with pytest.raises(SystemExit) as stop:
        run_script(_raises(error))
    assert (stop.value.code, capsys.readouterr().err) == (status, says)


def test_run_script_leaves_a_bug_its_traceback_and_status_1():
    with pytest.raises(RuntimeError, match="a bug"):
        run_script(_raises(RuntimeError("a bug")))  # Python prints it and exits 1
