"""Learning on generated ALFWorld, pool protocol: methods compared, paired, on the games RL meets.

**Protocol** (``pool``). For each seed, one SFT warm start (the embedded default's model and
SFT, with ``sft.skill_share`` so that ADRS's teacher can read skill text; every method of the
seed starts from it) and one RL pool (``env.pool_games_per_type`` train games per task type,
drawn with the seed, ``train.build.draw_pool``). Every method of a seed then runs the same RL
updates from that start, on that pool, with the same task draws (the seed's task stream) and
rollout budget. The headline is success on the pool (``eval/pool/*``, several episodes per
game); the held-out validation games are evaluated beside it, at the start and the end
(``eval.held_out=ends``), and reported under their own names, never merged into it.

The start is evaluated once per seed (``bench_common.start_evaluation``: the evaluation every
run of the seed would log at update 0); the runs skip their own. Each game's outcome is its
share of episodes won (``train.evaluation.outcomes.game_shares``), so every figure is a mean
over the ``[seeds, games]`` table of per-game values, and every interval a 95 % percentile
bootstrap that resamples seeds and games (``train.evaluation.outcomes.bootstrap_mean_interval``,
10,000 resamples, seed 0).

``metrics``, per method ``m``: ``success_start_mean.m``, ``success_final_mean.m``,
``success_gain_mean.m`` (final − start on the pool), ``success_auc_mean.m`` (area under the
pool success curve over updates, trapezoids divided by the span of updates, in percent), each
with ``_ci_low`` / ``_ci_high`` after the name's first part (``success_gain_ci_low.m``);
``success_gain_min.m`` (the worst seed's gain); ``held_out_gain_mean.m`` with its interval and
``held_out_start_mean.m`` / ``held_out_final_mean.m``. Per pair ``A-B`` of ``PAIRS`` (both
run): ``paired_gain_diff_mean.A-B`` and ``paired_auc_diff_mean.A-B`` with ``_ci_low`` /
``_ci_high``, the mean over seeds and games of A's per-game gain (AUC) minus B's, the same
game under the same seed. ADRS's ``probe_gap_{class}.m`` (the teacher's token gap on the probe
trajectories at each run's last evaluation, averaged over seeds) says whether its teacher
carries signal (> 0). ``pool_games``, ``held_out_games``, ``seeds`` and ``wall_s``.

    python benchmarks/learning_alfworld.py [--quick] [--methods grpo,gigpo,...] [--seeds 0,1,2,3,4]
        [--updates N] [--evaluations K] [--output-dir DIR] [--workers 2] [--name RESULT]
        [key=value ...]

A method is ``NAME[/BACKBONE[/GATE]]`` (``bench_common.method_overrides``). Extra
``key=value`` overrides go to every SFT and RL run. With ``--output-dir``, a second call with
the same arguments resumes: finished SFT starts, start evaluations and runs are read back,
unfinished runs resume from their last checkpoint.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import signal
import sys
import tempfile
import time
from pathlib import Path

from agentcredit.train.evaluation.outcomes import (
    POOL,
    bootstrap_mean_interval,
    evaluated_splits,
    game_shares,
)
from bench_common import (
    BenchmarkParser,
    at_least,
    check_runs,
    folder_to_fill,
    method_config,
    result_name,
    run_method,
    run_script,
    seed_list,
    sft_start,
    start_evaluation,
    write_result,
)

PROTOCOL = "pool"
DEFAULT_METHODS = "grpo,gigpo,vict/grpo,vict/gigpo,adrs/grpo,adrs/gigpo"
DEFAULT_SEEDS = "0,1,2,3,4"
#: the paired comparisons: (A, B) reports A − B
PAIRS = (("vict/grpo", "grpo"), ("vict/gigpo", "gigpo"), ("adrs/grpo", "grpo"),
         ("adrs/gigpo", "gigpo"), ("vict/grpo", "random_edges/grpo"),
         ("vict/grpo", "vict+median/grpo"))
#: every run's settings: the pool protocol (the embedded default's pool and its 16 updates,
#: evaluated at the start and the end unless ``--evaluations`` asks for more), the
#: skill-prefixed SFT that ADRS's teacher needs
PROTOCOL_OVERRIDES = ("sft.skill_share=0.5", "eval.held_out=ends")
#: a smoke-sized run: two seeds of a few games, a short SFT, two updates
QUICK_OVERRIDES = ("env.train_games_per_type=2", "env.valid_games_per_type=1",
                   "env.pool_games_per_type=1", "eval.pool_episodes_per_game=2",
                   "sft.epochs=1", "rollout.tasks_per_update=2")

#: The targets of the pool protocol on 2 cores.
TARGETS = {"seeds": {"min": 5},
           "success_gain_mean.grpo": {"min": 0.10},
           "success_gain_ci_low.grpo": {"above": 0},
           "wall_s": {"max": 9000}}


# STATISTICS (pure: tests/benchmarks/test_learning_statistics.py)


def per_game_auc(curve: list[tuple[int, list[float]]]) -> list[float]:
    """Each game's area under its success curve, ``curve`` being ``(update, shares)`` in update
    order: trapezoids over updates divided by the span of updates, in percent (one point: its
    share). The mean over games is the area under the mean curve."""
    if len(curve) == 1:
        return [100.0 * share for share in curve[0][1]]
    span = curve[-1][0] - curve[0][0]
    games = len(curve[0][1])
    return [100.0 * sum((b[0] - a[0]) * (a[1][g] + b[1][g]) / 2
                        for a, b in itertools.pairwise(curve)) / span for g in range(games)]


def _mean(table: list[list[float]]) -> float:
    return sum(map(sum, table)) / sum(map(len, table))


def _with_interval(name: str, method: str, table: list[list[float]]) -> dict[str, float]:
    """``{name}_mean.{method}`` and its bootstrap ``{name}_ci_low`` / ``_ci_high``."""
    low, high = bootstrap_mean_interval(table)
    return {f"{name}_mean.{method}": _mean(table), f"{name}_ci_low.{method}": low,
            f"{name}_ci_high.{method}": high}


def method_statistics(runs: list[dict], method: str) -> dict[str, float]:
    """``method``'s figures over its runs (one per seed). A run carries ``pool_start`` and
    ``pool_final`` (its pool's per-game shares), ``pool_auc`` (``per_game_auc``) and
    ``held_out_start`` / ``held_out_final``."""
    mine = [r for r in runs if r["method"] == method]
    gains = [[b - a for a, b in zip(r["pool_start"], r["pool_final"], strict=True)]
             for r in mine]
    held_out = [[b - a for a, b in zip(r["held_out_start"], r["held_out_final"], strict=True)]
                for r in mine]
    return {**_with_interval("success_start", method, [r["pool_start"] for r in mine]),
            **_with_interval("success_final", method, [r["pool_final"] for r in mine]),
            **_with_interval("success_gain", method, gains),
            f"success_gain_min.{method}": min(sum(g) / len(g) for g in gains),
            **_with_interval("success_auc", method, [r["pool_auc"] for r in mine]),
            **_with_interval("held_out_gain", method, held_out),
            f"held_out_start_mean.{method}": _mean([r["held_out_start"] for r in mine]),
            f"held_out_final_mean.{method}": _mean([r["held_out_final"] for r in mine])}


def paired_statistics(runs: list[dict], first: str, second: str) -> dict[str, float]:
    """``first − second``, game by game under each seed both ran: ``paired_gain_diff_*`` (the
    starts are shared, so a game's gain difference is its final difference) and
    ``paired_auc_diff_*``, means with bootstrap intervals.

    Raises:
        ValueError: the two methods share no seed.
    """
    by_seed = {(r["method"], r["seed"]): r for r in runs}
    seeds = sorted(seed for method, seed in by_seed if method == first
                   and (second, seed) in by_seed)
    if not seeds:
        raise ValueError(f"{first} and {second} share no seed; a paired difference needs both "
                         "methods run with the same seeds")
    pair = f"{first}-{second}"
    gain, auc = [], []
    for seed in seeds:
        a, b = by_seed[(first, seed)], by_seed[(second, seed)]
        if a["pool_start"] != b["pool_start"]:
            raise ValueError(f"{first} and {second} under seed {seed} start from different "
                             "evaluations: they are not paired")
        gain.append([x - y for x, y in zip(a["pool_final"], b["pool_final"], strict=True)])
        auc.append([x - y for x, y in zip(a["pool_auc"], b["pool_auc"], strict=True)])
    return {**_with_interval("paired_gain_diff", pair, gain),
            **_with_interval("paired_auc_diff", pair, auc)}


def result_metrics(metrics: dict[str, float], runs: list[dict], seeds: list[int],
                   began: float) -> dict:
    """The result file's ``metrics``: ``metrics`` rounded, with the seed and game counts of
    ``runs`` and the wall time since ``began`` (``time.perf_counter``)."""
    return {**{k: round(v, 4) for k, v in metrics.items()}, "seeds": len(seeds),
            "pool_games": len(runs[0]["pool_start"]),
            "held_out_games": len(runs[0]["held_out_start"]),
            "wall_s": round(time.perf_counter() - began, 1)}


def run_record(method: str, seed: int, evaluations: list[dict], updates: list[dict]) -> dict:
    """One run's record from its start evaluation and its ``metrics.jsonl`` lines: the pool's
    per-game shares at the start and the end, their ``per_game_auc``, the held-out splits'
    shares at the start and at the last evaluation holding them, the curve, the last
    evaluation's figures and the mean ``credit/*`` and ``time/*`` diagnostics."""
    start, last = evaluations[0], evaluations[-1]
    held_out = [split for split in evaluated_splits(start) if split != POOL]
    held_out_last = next(e for e in reversed(evaluations) if f"eval/{held_out[0]}/won" in e)
    name, _, backbone = method.partition("/")
    keys = sorted({k for r in updates for k in r if k.startswith(("credit/", "time/"))
                   and isinstance(r[k], int | float)})
    return {"method": method, "backbone": backbone.split("/")[0] or name, "seed": seed,
            "curve": [{"update": e["update"],
                       **{f"success_{s}": e[f"eval/{s}/success"] for s in evaluated_splits(e)}}
                      for e in evaluations],
            "final": {k.removeprefix("eval/"): v for k, v in last.items()
                      if k.startswith("eval/") and not k.endswith("/won")},
            "pool_start": game_shares(start, [POOL]), "pool_final": game_shares(last, [POOL]),
            "pool_auc": per_game_auc([(e["update"], game_shares(e, [POOL]))
                                      for e in evaluations]),
            "held_out_start": game_shares(start, held_out),
            "held_out_final": game_shares(held_out_last, held_out),
            "diagnostics": {k: sum(r.get(k, 0.0) for r in updates) / len(updates)
                            for k in keys} if updates else {}}


# RUNNING

#: tries after an OSError such as a full disk (a shared disk can stay full for minutes)
#: and the seconds between them
RETRIES, RETRY_WAIT_S = 8, 120


def run_with_retries(start: Path, method: str, overrides: list[str], name: str,
                     position: str) -> list[dict]:
    """``run_method``, tried again after an OSError (``RETRIES`` times at most); a retry
    resumes from the run's last checkpoint. ``position`` (``"3/30"``) is printed with the
    method and seed as the run begins and as it ends."""
    seed = next(o for o in reversed(overrides) if o.startswith("run.seed=")).split("=")[1]
    print(f"run {position}: {method}, seed {seed} ...", file=sys.stderr, flush=True)
    began = time.perf_counter()
    for attempt in range(1, RETRIES + 2):
        try:
            records = run_method(start, method, overrides, name)
            break
        except OSError as err:
            if attempt > RETRIES:
                raise
            print(f"{name}: {err}; try {attempt}/{RETRIES} again in {RETRY_WAIT_S} s",
                  file=sys.stderr, flush=True)
            time.sleep(RETRY_WAIT_S)
    print(f"run {position}: {method}, seed {seed} done in {time.perf_counter() - began:.0f} s",
          file=sys.stderr, flush=True)
    return records


def seed_start(overrides: list[str], seed: int, position: str) -> Path:
    """The seed's SFT start (trained once, then read back); ``position`` as
    ``run_with_retries``'s."""
    print(f"start {position}: SFT of seed {seed} ...", file=sys.stderr, flush=True)
    return sft_start([*overrides, f"run.seed={seed}"], f"sft_seed{seed}")


def saved_start_evaluation(start: Path, method: str, overrides: list[str], name: str,
                           saved: Path) -> dict:
    """The start's evaluation under the run's settings, kept in ``saved`` once computed."""
    if saved.is_file():
        return json.loads(saved.read_text())
    print(f"{saved.stem} ...", file=sys.stderr, flush=True)
    record = start_evaluation(start, method_config(start, method, overrides, name), {})
    saved.write_text(json.dumps(record))
    return record


def _map(workers: int, function, jobs: list[tuple]) -> list:
    """``function(*job)`` for every job, ``workers`` processes at a time (one CPU thread each),
    each taking the next job when it finishes one."""
    if workers <= 1:
        return [function(*job) for job in jobs]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return pool.starmap(function, jobs, chunksize=1)


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--seeds", default=None, type=seed_list,
                        help=f"comma-separated (full: {DEFAULT_SEEDS}; quick: 0,1)")
    parser.add_argument("--updates", type=at_least(1), default=None,
                        help="RL updates per run (full: 16, the embedded default's; quick: 2)")
    parser.add_argument("--evaluations", type=at_least(1), default=1,
                        help="pool evaluations per run after the start, evenly spaced, the "
                             "last at the end (default %(default)s; more draw the AUC's curve)")
    parser.add_argument("--output-dir", default=None, type=folder_to_fill,
                        help="where starts and runs go (default: a temp dir); what is found "
                             "there is read back (finished) or resumed (unfinished)")
    parser.add_argument("--workers", type=at_least(1), default=2,
                        help="processes in parallel, one CPU thread each (default %(default)s)")
    parser.add_argument("--name", default="learning_alfworld", type=result_name,
                        help="result file benchmarks/results/NAME.json (default: %(default)s)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    methods = args.methods.split(",")
    seeds = args.seeds or seed_list("0,1" if args.quick else DEFAULT_SEEDS)
    updates = args.updates or (2 if args.quick else 16)
    began = time.perf_counter()
    every = max(1, updates // max(1, args.evaluations))
    schedule = {"run.eval_every": every, "run.checkpoint_every": min(every, max(1, updates // 4))}
    overridden = {override.split("=", 1)[0] for override in args.overrides}
    settings = ["run.progress=false", "run.threads=1", f"run.updates={updates}",
                *PROTOCOL_OVERRIDES, *(QUICK_OVERRIDES if args.quick else ()),
                *(f"{key}={value}" for key, value in schedule.items() if key not in overridden),
                *args.overrides]
    check_runs(methods, seeds, settings)
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="learning-alfworld-"))
    root.mkdir(parents=True, exist_ok=True)
    common = [f"run.output_dir={root}", *settings]
    # a killed benchmark must take its workers with it, or they keep writing run dirs
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    starts = dict(zip(seeds, _map(args.workers, seed_start, [
        (common, seed, f"{n}/{len(seeds)}") for n, seed in enumerate(seeds, 1)]), strict=True))
    jobs = [(starts[seed], method, [*common, f"run.seed={seed}"],
             f"{method.replace('/', '-')}_seed{seed}") for seed in seeds for method in methods]
    # every method of a seed shares the evaluation settings: one start evaluation per seed
    start_evals = dict(zip(seeds, _map(args.workers, saved_start_evaluation, [
        (*jobs[n * len(methods)], root / f"start_eval_seed{seed}.json")
        for n, seed in enumerate(seeds)]), strict=True))
    jobs = [(*job[:2], [*job[2], "run.eval_at_start=false"], job[3], f"{n}/{len(jobs)}")
            for n, job in enumerate(jobs, 1)]
    results = _map(args.workers, run_with_retries, jobs)
    runs = []
    for (seed, method), records in zip(itertools.product(seeds, methods), results, strict=True):
        evaluations = [start_evals[seed], *(r for r in records if r["kind"] == "eval")]
        runs.append(run_record(method, seed, evaluations,
                               [r for r in records if r["kind"] == "update"]))
        runs[-1]["probe_gap"] = {k.removeprefix("eval/probe_gap/"): v
                                 for k, v in evaluations[-1].items()
                                 if k.startswith("eval/probe_gap/")}
    metrics: dict[str, float] = {}
    for method in methods:
        metrics.update(method_statistics(runs, method))
        if method.startswith("adrs"):
            gaps = [r["probe_gap"] for r in runs if r["method"] == method]
            metrics.update({f"probe_gap_{name}.{method}": sum(g[name] for g in gaps) / len(gaps)
                            for name in sorted(set.intersection(*(set(g) for g in gaps)))})
    for first, second in PAIRS:
        if first in methods and second in methods:
            metrics.update(paired_statistics(runs, first, second))
    path = write_result(
        args.name,
        config={"protocol": PROTOCOL, "methods": methods, "seeds": seeds, "updates": updates,
                "workers": args.workers, "overrides": common},
        metrics=result_metrics(metrics, runs, seeds, began),
        targets=TARGETS,
        notes=("Pool protocol: per seed one SFT start (sft.skill_share 0.5, for ADRS's "
               "teacher) and one RL pool of training games shared by every method, with the "
               "same task draws; success_* is on the pool (the games RL trains on, several "
               "episodes each), held_out_* on the validation games (new games, at the start "
               "and the end). Intervals: 95% bootstraps over seeds x games of per-game values "
               "(each game's share won); paired_*_diff compares two methods game by game "
               "under the same seed. probe_gap_*: ADRS's teacher gap at the last evaluation "
               "(> 0: the teacher carries signal). Generated games are not comparable with "
               "published ALFWorld numbers."),
        quick=args.quick, protocol=PROTOCOL, seeds=seeds,
        diagnostics={m: {k: round(sum(r["diagnostics"].get(k, 0.0) for r in runs
                                      if r["method"] == m) / len(seeds), 4)
                         for k in sorted({k for r in runs if r["method"] == m
                                          for k in r["diagnostics"]})} for m in methods},
        runs=runs)
    print(path.read_text())


if __name__ == "__main__":
    run_script(main)
