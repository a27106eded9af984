"""Learning on generated ALFWorld: methods compared from the same SFT start and rollout budget.

One SFT warm start is trained (the embedded default's model and SFT, with the
first seed) and every method and seed then runs the same number of RL updates
from it, with the same rollouts per update and the same evaluation schedule:
the seeds vary the RL run (task draws, sampling), not the start. Curves are the
evaluations in each run's ``metrics.jsonl``, after the start's evaluation: that one
is run once per seed and evaluation setting (``bench_common.start_evaluation``; it
is the evaluation each run would log at update 0) and the runs skip their own.

Per method, ``metrics`` holds ``success_start_mean`` (the start's success under each
seed's evaluation sampling), ``success_final_mean``, ``success_gain_mean``
(final − start), ``success_gain_min`` (the worst seed's gain), ``success_auc_mean``
and ``success_gain_ci_low`` / ``success_gain_ci_high``: a 95 % percentile bootstrap
interval of the mean gain (``bench_common.bootstrap_mean_interval``, 10,000
resamples, seed 0) over the ``[seeds, games]`` table of per-game gains, each the
game's final outcome minus its start outcome (−1, 0 or 1) read from the evaluations'
``eval/{split}/won`` strings. ``eval_games`` is the games per evaluation and
``wall_s`` the whole benchmark's wall time.

    python benchmarks/learning_alfworld.py [--quick] [--methods grpo,vict/gigpo,adrs/gigpo/L3]
        [--seeds 0,1,2] [--updates N] [--output-dir DIR] [--start SFT_DIR] [--workers 2]
        [--name RESULT] [key=value ...]

A method is ``NAME[/BACKBONE[/GATE]]`` (``bench_common.method_overrides``).
Extra ``key=value`` overrides go to every run. One evaluation with one episode per game
is a wide sample (the embedded start read 13.0–26.9 % under five seeds, README), so a
gain of a few points needs ``eval.episodes_per_game=4``; at about 4.5 minutes per such
evaluation on one core, ``run.eval_every=N`` (the final evaluation only) keeps it
affordable. Each game's outcome is then its share of episodes won.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import signal
import sys
import tempfile
import time
from pathlib import Path

from agentcredit.train.outcomes import bootstrap_mean_interval
from bench_common import (
    method_config,
    run_method,
    sft_start,
    start_evaluation,
    write_result,
)

DEFAULT_METHODS = "grpo,gigpo,vict/grpo,vict/gigpo,adrs/grpo/L2,adrs/gigpo/L3,skill_grpo,sdar"

#: Issue 12's targets for the embedded default (3 seeds, one shared start, 2 cores).
TARGETS = {"success_start_mean.grpo": {"min": 0.20, "max": 0.60},
           "success_gain_mean.grpo": {"min": 0.10},
           "success_gain_min.grpo": {"min": 1 / 108},  # every seed gains: a game of 108 at least
           "eval_games": {"min": 108},
           "wall_s": {"max": 9000}}


def _curve(evals: list[dict]) -> list[dict]:
    return [{"update": r["update"], "success": r["eval/success"],
             **{k.removeprefix("eval/").replace("/", "_"): v for k, v in r.items()
                if k.startswith("eval/") and k.endswith("/success") and k.count("/") == 2}}
            for r in evals]


#: tries after an OSError such as a full disk (a shared disk can stay full for minutes)
#: and the seconds between them
RETRIES, RETRY_WAIT_S = 8, 120


def _run(start: Path, method: str, overrides: list[str], name: str) -> list[dict]:
    """``run_method``, tried again after an OSError (``RETRIES`` times at most); a retry
    resumes from the run's last checkpoint."""
    print(f"{name} ...", file=sys.stderr, flush=True)
    for attempt in range(1, RETRIES + 1):
        try:
            return run_method(start, method, overrides, name)
        except OSError as err:
            print(f"{name}: {err}; try {attempt}/{RETRIES} again in {RETRY_WAIT_S} s",
                  file=sys.stderr, flush=True)
            time.sleep(RETRY_WAIT_S)
    return run_method(start, method, overrides, name)


def _mean_diagnostics(updates: list[dict]) -> dict[str, float]:
    """Each ``credit/*`` and ``time/*`` figure averaged over a run's updates."""
    keys = sorted({k for r in updates for k in r if k.startswith(("credit/", "time/"))
                   and isinstance(r[k], int | float)})
    return {k: sum(r.get(k, 0.0) for r in updates) / len(updates) for k in keys} if updates else {}


def per_game_won(evaluation: dict) -> list[float]:
    """Each game's share of episodes won in one ``eval`` line (1 won, 0 not, with one episode
    per game), splits in name order, games in each split's task order (``eval/{split}/won``
    holds the episodes won, ``eval/episodes_per_game`` how many were played; see
    ``train.evaluate.evaluate``)."""
    keys = sorted(k for k in evaluation if k.startswith("eval/") and k.endswith("/won"))
    if not keys:
        raise SystemExit(f"an eval line of update {evaluation.get('update')} has no per-game "
                         "outcomes (eval/<split>/won): the run was logged before they were; "
                         "run it again in a fresh --output-dir")
    episodes = evaluation.get("eval/episodes_per_game", 1)
    return [int(wins) / episodes for key in keys for wins in evaluation[key]]


def gain_statistics(runs: list[dict], method: str) -> dict[str, float]:
    """``method``'s start and gain figures over its runs (one per seed); each run carries
    ``start_won`` and ``final_won``, its first and last evaluation's ``per_game_won``."""
    mine = [r for r in runs if r["method"] == method]
    gains = [[end - begin for begin, end in zip(r["start_won"], r["final_won"], strict=True)]
             for r in mine]
    start = [sum(r["start_won"]) / len(r["start_won"]) for r in mine]
    per_seed = [sum(g) / len(g) for g in gains]
    low, high = bootstrap_mean_interval(gains)
    return {f"success_start_mean.{method}": sum(start) / len(start),
            f"success_gain_mean.{method}": sum(per_seed) / len(per_seed),
            f"success_gain_min.{method}": min(per_seed),
            f"success_gain_ci_low.{method}": low,
            f"success_gain_ci_high.{method}": high}


def _auc_pct(curve: list[dict]) -> float:
    """Area under the success curve over updates, as a percentage of the full box."""
    if len(curve) < 2:
        return 100.0 * curve[0]["success"] if curve else 0.0
    area = sum((b["update"] - a["update"]) * (a["success"] + b["success"]) / 2
               for a, b in itertools.pairwise(curve))
    return 100.0 * area / (curve[-1]["update"] - curve[0]["update"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--seeds", default=None, help="comma-separated (full: 0,1,2; quick: 0)")
    parser.add_argument("--updates", type=int, default=None, help="RL updates per run")
    parser.add_argument("--output-dir", default=None,
                        help="where runs go (default: a temp dir); runs found there are read "
                             "back (finished) or resumed (unfinished), not started again")
    parser.add_argument("--start", default=None, help="SFT checkpoint to start from (else trained)")
    parser.add_argument("--workers", type=int, default=1,
                        help="runs in parallel, one CPU thread each (default 1: one at a time)")
    parser.add_argument("--name", default="learning_alfworld",
                        help="result file benchmarks/results/NAME.json (default: %(default)s)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    methods = args.methods.split(",")
    seeds = [int(s) for s in (args.seeds or ("0" if args.quick else "0,1,2")).split(",")]
    updates = args.updates or (2 if args.quick else 20)
    began = time.perf_counter()
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="learning-alfworld-"))
    schedule = {"run.eval_every": max(1, updates // 4),
                "run.checkpoint_every": max(1, updates // 4)}
    overridden = {override.split("=", 1)[0] for override in args.overrides}
    common = [f"run.output_dir={root}", "run.progress=false", f"run.updates={updates}",
              *(f"{key}={value}" for key, value in schedule.items() if key not in overridden),
              *args.overrides]
    if args.quick:
        common += ["env.valid_games_per_type=1", "rollout.tasks_per_update=2"]
    start = (Path(args.start) if args.start
             else sft_start([*common, f"run.seed={seeds[0]}"], f"sft_seed{seeds[0]}"))
    jobs = [(start, method, [*common, f"run.seed={seed}"], f"{method.replace('/', '-')}_seed{seed}")
            for seed in seeds for method in methods]
    # the start is evaluated once per seed and evaluation setting, not once per run
    cache: dict = {}
    starts = [start_evaluation(start, method_config(*job), cache) for job in jobs]
    print(f"start evaluated {len(cache)} times for {len(jobs)} runs", file=sys.stderr, flush=True)
    jobs = [(*job[:2], [*job[2], "run.eval_at_start=false"], job[3]) for job in jobs]
    if args.workers > 1:
        # a killed benchmark must take its workers with it, or they keep writing run dirs
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
        jobs = [(*job[:2], [*job[2], "run.threads=1"], job[3]) for job in jobs]
        with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
            results = pool.starmap(_run, jobs)
    else:
        results = [_run(*job) for job in jobs]
    runs = []
    for (seed, method), records, start_eval in zip(itertools.product(seeds, methods), results,
                                                   starts, strict=True):
        evals = [start_eval, *(r for r in records if r["kind"] == "eval")]
        updates_logged = [r for r in records if r["kind"] == "update"]
        name, _, backbone = method.partition("/")
        runs.append({"method": method, "backbone": backbone.split("/")[0] or name, "seed": seed,
                     "curve": _curve(evals),
                     "final": {k.removeprefix("eval/"): v for k, v in evals[-1].items()
                               if k.startswith("eval/") and not k.endswith("/won")},
                     "start_won": per_game_won(evals[0]), "final_won": per_game_won(evals[-1]),
                     "diagnostics": _mean_diagnostics(updates_logged)})
    eval_games = {len(r["final_won"]) for r in runs} | {len(r["start_won"]) for r in runs}
    if len(eval_games) != 1:
        raise SystemExit(f"evaluations of different sizes ({sorted(eval_games)} games): every "
                         "run must use the same env settings")
    metrics, diagnostics = {}, {}
    for method in methods:
        mine = [r for r in runs if r["method"] == method]
        metrics[f"success_final_mean.{method}"] = (sum(r["curve"][-1]["success"] for r in mine)
                                                   / len(mine))
        metrics.update(gain_statistics(runs, method))
        metrics[f"success_auc_mean.{method}"] = sum(_auc_pct(r["curve"]) for r in mine) / len(mine)
        keys = sorted({k for r in mine for k in r["diagnostics"]})
        diagnostics[method] = {
            k: round(sum(r["diagnostics"].get(k, 0.0) for r in mine) / len(mine), 4)
            for k in keys}
    path = write_result(
        args.name,
        config={"methods": methods, "seeds": seeds, "updates": updates, "overrides": common},
        metrics={**{k: round(v, 4) for k, v in metrics.items()},
                 "eval_games": eval_games.pop(), "wall_s": round(time.perf_counter() - began, 1)},
        targets=TARGETS,
        notes=("Embedded default (tiny model, generated small rooms) unless overridden; every "
               "method and seed starts from one SFT checkpoint and gets the same rollout budget; "
               "success is over valid_seen + valid_unseen at temperature 0.4. The gain's "
               "95% interval is a bootstrap over seeds x games of per-game gains (final - "
               "start outcome); start_won / final_won in `runs` are those outcomes. "
               "`diagnostics` "
               "holds each method's credit diagnostics (VICT docs/vict.md §4.9, ADRS gates) "
               "averaged over updates and seeds. Generated games are not comparable with "
               "published ALFWorld numbers."),
        quick=args.quick, diagnostics=diagnostics, runs=runs)
    print(path.read_text())


if __name__ == "__main__":
    main()
