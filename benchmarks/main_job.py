"""The README's main job, `make run`, timed on a fresh checkout with an empty game cache.

The project is put in a new temporary folder (by default `git clone` of this
repository's HEAD: uncommitted changes are not in it; `--source DIR` copies the
tree DIR instead, without `.venv`, `.cache`, `runs` and other build output), then
`make run` runs there: it creates `.venv`, installs the project with its extras,
generates the games into the empty `.cache/` and trains the embedded default.

    python benchmarks/main_job.py [--quick] [--source DIR] [--reuse-venv PATH] [--keep]

`--reuse-venv PATH` links `.venv` to an existing environment and skips the install
(`make -o` the install stamp), with `PYTHONPATH` set to the checkout's `src/` so
the checkout's code runs, not the code the environment was installed from. That
is not a fresh-machine measurement (`config.reuse_venv` records it). `--quick`
installs the same way but trains a smoke-sized run (`QUICK_OVERRIDES`) instead of
`make run`'s.

Figures (`benchmarks/results/main_job.json`): `wall_s` of the whole command;
`peak_rss_mb`, the largest resident set of any process in the command's tree
(`ru_maxrss` semantics, from `/usr/bin/time -v`, else `getrusage(RUSAGE_CHILDREN)`:
the peak of the biggest process, not a sum over processes running together);
`success_start` and `success_final`, the first (update 0) and the last
evaluation's `eval/success` in the run's `metrics.jsonl`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import write_result

REPO = Path(__file__).resolve().parents[1]
STAMP = ".venv/.agentcredit-installed"
GNU_TIME = Path("/usr/bin/time")
#: a smoke-sized embedded run: a few games, one update
QUICK_OVERRIDES = ("env.train_games_per_type=2", "env.valid_games_per_type=1", "run.updates=1",
                   "run.checkpoint_every=1", "sft.epochs=1")
#: what `--source` leaves out of the copy: build output and the state a fresh checkout lacks
NOT_COPIED = (".venv", ".cache", "runs", "__pycache__", "*.egg-info", ".pytest_cache",
              ".ruff_cache", ".hypothesis")

#: Issue 12's targets: under 15 minutes on 2 cores, with a visible gain (a game of 108 at least).
TARGETS = {"wall_s": {"max": 900}, "success_gain": {"min": 1 / 108}}


def success_from_metrics(path: Path) -> dict[str, float | int]:
    """``success_start`` (the update-0 evaluation), ``success_final`` (the last evaluation),
    ``success_gain`` (final − start), ``final_update`` and ``evaluations`` from a run's
    ``metrics.jsonl``.

    Raises:
        SystemExit: the file has no evaluation of update 0 (the start) or no evaluation.
    """
    evals = [record for line in path.read_text().splitlines() if line.strip()
             for record in [json.loads(line)] if record.get("kind") == "eval"]
    start = [r for r in evals if r["update"] == 0]
    if not start:
        raise SystemExit(f"{path}: no evaluation of update 0 (the start); was "
                         "run.eval_at_start false?")
    first, last = start[0]["eval/success"], evals[-1]["eval/success"]
    return {"success_start": first, "success_final": last, "success_gain": last - first,
            "final_update": evals[-1]["update"], "evaluations": len(evals)}


def peak_rss_mb(time_report: str) -> float | None:
    """The "Maximum resident set size (kbytes)" of a ``/usr/bin/time -v`` report, in MB."""
    found = re.search(r"Maximum resident set size \(kbytes\):\s*(\d+)", time_report)
    return int(found.group(1)) / 1024 if found else None


def checkout(source: Path | None, into: Path) -> str:
    """Put the project in ``into``: a copy of ``source``'s tree, else a clone of HEAD; returns
    what was used, for the result's config."""
    if source is None:
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(into)], check=True)
        commit = subprocess.run(["git", "-C", str(into), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=True).stdout.strip()
        return f"git clone of {REPO} at {commit}"
    shutil.copytree(source, into, symlinks=True, ignore=shutil.ignore_patterns(*NOT_COPIED))
    return f"copy of {source.resolve()}"


def command(quick: bool, reuse_venv: bool) -> str:
    """The shell command run in the checkout."""
    keep_install = f" -o {STAMP}" if reuse_venv else ""
    if not quick:
        return f"make{keep_install} run"
    return (f"make{keep_install} {STAMP} && .venv/bin/agentcredit train run.name=quick "
            + " ".join(QUICK_OVERRIDES))


def measure(shell_command: str, cwd: Path, env: dict[str, str]) -> tuple[float, float | None]:
    """Run ``shell_command`` in ``cwd``; its wall seconds and peak RSS in MB."""
    report = cwd / ".time-report"
    timed = [str(GNU_TIME), "-v", "-o", str(report)] if GNU_TIME.is_file() else []
    began = time.perf_counter()
    done = subprocess.run([*timed, "bash", "-c", shell_command], cwd=cwd, env=env, check=False)
    wall = time.perf_counter() - began
    if timed:
        rss = peak_rss_mb(report.read_text()) if report.is_file() else None
    else:  # every child this process waited for, the checkout's git included; kB on Linux
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if done.returncode != 0:
        raise SystemExit(f"`{shell_command}` failed with exit status {done.returncode} in "
                         f"{cwd} (kept for a look)")
    return wall, rss


def newest_run(checkout_dir: Path) -> Path:
    """The run directory the command made (the newest under ``runs/``)."""
    runs = sorted((p for p in (checkout_dir / "runs").glob("*/metrics.jsonl")),
                  key=lambda p: p.stat().st_mtime)
    if not runs:
        raise SystemExit(f"no run directory with metrics.jsonl under {checkout_dir / 'runs'}")
    return runs[-1].parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized training run")
    parser.add_argument("--source", type=Path, default=None,
                        help="project tree to copy (default: a git clone of HEAD)")
    parser.add_argument("--reuse-venv", type=Path, default=None, metavar="PATH",
                        help="link .venv to this environment and skip the install (not a "
                             "fresh-machine measurement)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary checkout")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="main-job-"))
    into = work / "agentcredit"
    used = checkout(args.source, into)
    env = dict(os.environ)
    if args.reuse_venv is not None:
        (into / ".venv").symlink_to(args.reuse_venv.resolve(), target_is_directory=True)
        env["PYTHONPATH"] = str(into / "src")
    shell_command = command(args.quick, args.reuse_venv is not None)
    print(f"{shell_command}  (in {into})", file=sys.stderr, flush=True)
    wall, rss = measure(shell_command, into, env)
    run_dir = newest_run(into)
    metrics = {"wall_s": round(wall, 1),
               "peak_rss_mb": None if rss is None else round(rss, 1),
               **success_from_metrics(run_dir / "metrics.jsonl")}
    path = write_result(
        "main_job",
        config={"command": shell_command, "source": used,
                "reuse_venv": str(args.reuse_venv) if args.reuse_venv else None,
                "rss_from": "/usr/bin/time -v" if GNU_TIME.is_file() else "RUSAGE_CHILDREN"},
        metrics=metrics, targets=TARGETS,
        notes=("`make run` in a fresh checkout with an empty game cache: install (unless "
               "reuse_venv), game generation, SFT, RL, evaluations. peak_rss_mb is the largest "
               "single process's peak resident set, not a sum. success_* are eval/success "
               "of the run's first (update 0) and last evaluations."),
        quick=args.quick)
    if not args.keep:
        if args.reuse_venv is not None:
            (into / ".venv").unlink()  # the link only, never the environment it points to
        shutil.rmtree(work)
    print(path.read_text())


if __name__ == "__main__":
    main()
