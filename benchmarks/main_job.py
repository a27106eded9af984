"""The README's main job, `make run`, timed on a fresh checkout with an empty game cache.

The project is put in a new temporary folder (by default `git clone` of this
repository's HEAD: uncommitted changes are not in it; `--source DIR` copies the
tree DIR instead, without `.venv`, `.cache`, `runs` and other build output), then
`make run` runs there: it creates `.venv`, installs the project with its extras,
generates the games into the empty `.cache/` and trains the embedded default.

    python benchmarks/main_job.py [--quick] [--source DIR] [--reuse-venv PATH] [--keep]

Then the same command runs a second time in the same checkout: it reuses the generated games
and the SFT start (`sft.cache`), and `second_run_wall_s` is its wall time (`--no-second-run`
skips it).

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
from the run's `metrics.jsonl`, the success on the RL pool (`pool_success_start`,
`_final`, `_gain`: the games RL trains on) and on the held-out games (`held_out_success_*`:
new games), each with its 95 % interval over games (`success_from_metrics`);
`second_run_wall_s` and `second_run_reused_start` (its SFT line says `sft/reused`).
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

import yaml

from agentcredit.train.evaluation.outcomes import (
    POOL,
    bootstrap_mean_interval,
    evaluated_splits,
    game_shares,
)
from bench_common import BenchmarkFailed, BenchmarkParser, run_script, write_result

REPO = Path(__file__).resolve().parents[1]
STAMP = ".venv/.agentcredit-installed"
GNU_TIME = Path("/usr/bin/time")
#: a smoke-sized embedded run: a few games, one update
QUICK_OVERRIDES = ("env.train_games_per_type=2", "env.valid_games_per_type=1",
                   "env.pool_games_per_type=1", "run.updates=1",
                   "run.checkpoint_every=1", "sft.epochs=1")
#: what `--source` leaves out of the copy: build output and the state a fresh checkout lacks
NOT_COPIED = (".venv", ".cache", "runs", "__pycache__", "*.egg-info", ".pytest_cache",
              ".ruff_cache", ".hypothesis")

#: the run's settings the result records
RUN_KEYS = ("run.updates", "run.seed", "rollout.tasks_per_update", "rollout.group_size",
            "optim.lr", "env.pool_games_per_type", "eval.pool_episodes_per_game",
            "eval.episodes_per_game", "env.valid_games_per_type")
#: The targets: under 20 minutes on 2 cores, a gain on the RL pool of at least 10 points
#: whose 95 % interval over the pool's games lies above 0, and a second run (reusing the
#: games and the start) under 700 s.
TARGETS = {"wall_s": {"max": 1200}, "pool_success_gain": {"min": 0.10},
           "pool_success_gain_ci_low": {"above": 0}, "second_run_wall_s": {"max": 700}}


def success_from_metrics(path: Path) -> dict[str, float | int]:
    """The run's success from its ``metrics.jsonl``: on the RL pool (``pool_*``) and on the
    held-out splits together (``held_out_*``), each at the start (the update-0 evaluation) and
    at the end (the last evaluation with that split), as the mean of the games' shares won
    with a 95 % bootstrap interval over the games (``_ci_low`` / ``_ci_high``), and the gain
    (final − start, its interval over the per-game gains); ``pool_games``, ``held_out_games``,
    ``final_update`` and ``evaluations``.

    Raises:
        BenchmarkFailed: no evaluation of update 0 (the start), or no pool split in it.
    """
    evals = [record for line in path.read_text().splitlines() if line.strip()
             for record in [json.loads(line)] if record.get("kind") == "eval"]
    start = next((r for r in evals if r["update"] == 0), None)
    if start is None:
        raise BenchmarkFailed(f"{path}: no evaluation of update 0 (the start); was "
                              "run.eval_at_start false?")
    if POOL not in evaluated_splits(start):
        raise BenchmarkFailed(f"{path}: the start's evaluation has no pool split; the main "
                              "job needs an RL pool (env.pool_games_per_type > 0)")
    held_out = [split for split in evaluated_splits(start) if split != POOL]
    figures: dict[str, float | int] = {}
    for name, splits in (("pool", [POOL]), ("held_out", held_out)):
        if not splits:
            continue
        final = next(r for r in reversed(evals) if f"eval/{splits[0]}/won" in r)
        shares = {"start": game_shares(start, splits), "final": game_shares(final, splits)}
        shares["gain"] = [b - a for a, b in zip(shares["start"], shares["final"], strict=True)]
        figures[f"{name}_games"] = len(shares["start"])
        for when, values in shares.items():
            low, high = bootstrap_mean_interval([values])
            figures.update({f"{name}_success_{when}": sum(values) / len(values),
                            f"{name}_success_{when}_ci_low": low,
                            f"{name}_success_{when}_ci_high": high})
    return {**figures, "final_update": evals[-1]["update"], "evaluations": len(evals)}


def phase_seconds(path: Path) -> dict[str, float]:
    """Seconds spent in SFT (``sft/seconds``), in all evaluations (``time/eval``) and in all
    RL updates (their ``time/*`` phases summed), from a run's ``metrics.jsonl``."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {"sft_s": sum(r.get("sft/seconds", 0.0) for r in records if r["kind"] == "sft"),
            "eval_s": sum(r.get("time/eval", 0.0) for r in records if r["kind"] == "eval"),
            "updates_s": sum(v for r in records if r["kind"] == "update"
                             for k, v in r.items() if k.startswith("time/"))}


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
        raise BenchmarkFailed(f"`{shell_command}` failed with exit status {done.returncode} "
                              f"in {cwd} (kept for a look)")
    return wall, rss


def reused_start(path: Path) -> bool:
    """Whether the run of ``metrics.jsonl`` read its SFT start from the cache."""
    return any(json.loads(line).get("sft/reused") == 1.0
               for line in path.read_text().splitlines() if line.strip())


def newest_run(checkout_dir: Path) -> Path:
    """The run directory the command made (the newest under ``runs/``)."""
    runs = sorted((p for p in (checkout_dir / "runs").glob("*/metrics.jsonl")),
                  key=lambda p: p.stat().st_mtime)
    if not runs:
        raise BenchmarkFailed(f"no run directory with metrics.jsonl under "
                              f"{checkout_dir / 'runs'}")
    return runs[-1].parent


def project_tree(text: str) -> Path:
    """``--source``: a folder holding the project's ``Makefile`` and ``pyproject.toml``."""
    if not all((Path(text) / name).is_file() for name in ("Makefile", "pyproject.toml")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a project tree (a folder with "
                                         "Makefile and pyproject.toml)")
    return Path(text)


def environment(text: str) -> Path:
    """``--reuse-venv``: a virtual environment's folder (its ``bin/python``)."""
    if not (Path(text) / "bin" / "python").exists():
        raise argparse.ArgumentTypeError(f"{text!r} is not a virtual environment (no "
                                         "bin/python)")
    return Path(text)


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized training run")
    parser.add_argument("--source", type=project_tree, default=None,
                        help="project tree to copy (default: a git clone of HEAD)")
    parser.add_argument("--reuse-venv", type=environment, default=None, metavar="PATH",
                        help="link .venv to this environment and skip the install (not a "
                             "fresh-machine measurement)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary checkout")
    parser.add_argument("--no-second-run", action="store_true",
                        help="skip the second run that reuses the games and the start")
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
    second: dict[str, float | bool] = {}
    if not args.no_second_run:
        time.sleep(1)  # the second run's directory name (its start second) differs
        second_wall, _ = measure(shell_command, into, env)
        second = {"second_run_wall_s": round(second_wall, 1),
                  "second_run_reused_start": reused_start(newest_run(into) / "metrics.jsonl")}
    metrics = {"wall_s": round(wall, 1),
               "peak_rss_mb": None if rss is None else round(rss, 1),
               **success_from_metrics(run_dir / "metrics.jsonl"),
               **{k: round(v, 1) for k, v in phase_seconds(run_dir / "metrics.jsonl").items()},
               **second}
    run_config = yaml.safe_load((run_dir / "config.yaml").read_text())
    path = write_result(
        "main_job",
        config={"command": shell_command, "source": used,
                "reuse_venv": str(args.reuse_venv) if args.reuse_venv else None,
                "rss_from": "/usr/bin/time -v" if GNU_TIME.is_file() else "RUSAGE_CHILDREN",
                "run": {key: run_config[section][field] for key in RUN_KEYS
                        for section, field in [key.split(".")]}},
        metrics=metrics, targets=TARGETS,
        notes=("`make run` in a fresh checkout with an empty game cache: install (unless "
               "reuse_venv), game generation, SFT, RL, evaluations. peak_rss_mb is the largest "
               "single process's peak resident set, not a sum. pool_success_*: the RL pool "
               "(the training games RL trains on, several episodes each); held_out_success_*: "
               "the validation games (new games), at the run's first (update 0) and last "
               "evaluations; each game's outcome is its share of episodes won, and _ci_low / "
               "_ci_high a 95% bootstrap interval over the games (10,000 resamples, seed 0)."),
        quick=args.quick)
    if not args.keep:
        if args.reuse_venv is not None:
            (into / ".venv").unlink()  # the link only, never the environment it points to
        shutil.rmtree(work)
    print(path.read_text())


if __name__ == "__main__":
    run_script(main)
