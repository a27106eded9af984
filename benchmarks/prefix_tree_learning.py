"""Learning on prefix trees against rows: the embedded default's GRPO, paired by seed.

For each seed, one SFT warm start of the embedded default (``bench_common.sft_start``) and one
RL pool; from that start GRPO runs the embedded default's updates twice, once with
``optim.layout=rows`` (every step row on its own, mini-batches of shuffled rows: the trainer
before prefix trees) and once with ``optim.layout=trees`` (the default: mini-batches of whole
rollouts, each rollout's rows one prefix tree). Both runs of a seed share the start, its
evaluation, the pool and the task draws, so ``paired_gain_diff_mean.trees-rows`` compares them
game by game. The SFT is the same for both layouts (SFT always runs on trees): this measures
the PPO layout, not SFT's batching.

``metrics``, per layout ``m``: the pool success at the start and the end and the gain with
95 % bootstrap intervals over seeds and games (``learning_alfworld.method_statistics``), the
held-out gain, ``peak_rss_mb.m`` (the largest resident set of the layout's runs, each run in
a fresh worker process), ``ppo_s_mean.m`` (seconds of PPO per update); and
``paired_gain_diff_mean.trees-rows`` with its interval, ``peak_rss_ratio`` (trees over rows)
and ``wall_s``.

    python benchmarks/prefix_tree_learning.py [--quick] [--seeds 0,1,2] [--output-dir DIR]
        [--workers 2] [key=value ...]

With ``--output-dir``, a second call with the same arguments reads back what finished.
"""

from __future__ import annotations

import multiprocessing
import resource
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench_common import (
    BenchmarkParser,
    at_least,
    check_runs,
    folder_to_fill,
    run_script,
    seed_list,
    write_result,
)
from learning_alfworld import (
    QUICK_OVERRIDES,
    method_statistics,
    paired_statistics,
    result_metrics,
    run_record,
    run_with_retries,
    saved_start_evaluation,
    seed_start,
)

LAYOUTS = ("rows", "trees")
TARGETS = {"seeds": {"min": 3},
           "paired_gain_diff_ci_high.trees-rows": {"min": 0.0,
                                                   "why": "trees do not hurt learning"},
           "peak_rss_ratio": {"max": 1.2}}


def _run_layout(start: Path, layout: str, overrides: list[str], name: str,
                position: str) -> tuple[list[dict], float]:
    """GRPO from ``start`` under ``optim.layout=layout``: the run's records and the peak
    resident set of this process in MB (each run has a process of its own)."""
    records = run_with_retries(start, "grpo", [*overrides, f"optim.layout={layout}"], name,
                               position)
    return records, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("--seeds", default=None, type=seed_list,
                        help="comma-separated (default 0,1,2; quick 0,1)")
    parser.add_argument("--output-dir", default=None, type=folder_to_fill,
                        help="where starts and runs go (default: a temp dir); what finished "
                             "there is read back")
    parser.add_argument("--workers", type=at_least(1), default=2,
                        help="processes in parallel, one CPU thread each (default %(default)s)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    seeds = args.seeds or seed_list("0,1" if args.quick else "0,1,2")
    began = time.perf_counter()
    settings = ["run.progress=false", "run.threads=1", "eval.held_out=ends",
                *(QUICK_OVERRIDES if args.quick else ()),
                *(("run.updates=2",) if args.quick else ()), *args.overrides]
    for layout in LAYOUTS:
        check_runs(["grpo"], seeds, [*settings, f"optim.layout={layout}"])
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="prefix-tree-learning-"))
    root.mkdir(parents=True, exist_ok=True)
    common = [f"run.output_dir={root}", *settings]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.workers) as pool:
        starts = dict(zip(seeds, pool.starmap(seed_start, [
            (common, seed, f"{n}/{len(seeds)}") for n, seed in enumerate(seeds, 1)],
            chunksize=1), strict=True))
        start_evals = dict(zip(seeds, pool.starmap(saved_start_evaluation, [
            (starts[seed], "grpo", [*common, f"run.seed={seed}"], f"trees_seed{seed}",
             root / f"start_eval_seed{seed}.json") for seed in seeds], chunksize=1),
            strict=True))
    jobs = [(starts[seed], layout,
             [*common, f"run.seed={seed}", "run.eval_at_start=false"], f"{layout}_seed{seed}")
            for seed in seeds for layout in LAYOUTS]
    jobs = [(*job, f"{n}/{len(jobs)}") for n, job in enumerate(jobs, 1)]
    with context.Pool(args.workers, maxtasksperchild=1) as pool:
        results = pool.starmap(_run_layout, jobs, chunksize=1)
    runs, peak = [], {layout: 0.0 for layout in LAYOUTS}
    for (_, layout, overrides, *_), (records, rss_mb) in zip(jobs, results, strict=True):
        seed = int(next(o for o in overrides if o.startswith("run.seed=")).split("=")[1])
        evaluations = [start_evals[seed], *(r for r in records if r["kind"] == "eval")]
        runs.append(run_record(layout, seed, evaluations,
                               [r for r in records if r["kind"] == "update"]))
        runs[-1]["peak_rss_mb"] = round(rss_mb, 1)
        peak[layout] = max(peak[layout], rss_mb)
    metrics: dict[str, float] = {}
    for layout in LAYOUTS:
        metrics.update(method_statistics(runs, layout))
        ppo = [r["diagnostics"]["time/update"] for r in runs if r["method"] == layout]
        metrics[f"ppo_s_mean.{layout}"] = sum(ppo) / len(ppo)
        metrics[f"peak_rss_mb.{layout}"] = peak[layout]
    metrics.update(paired_statistics(runs, "trees", "rows"))
    metrics["peak_rss_ratio"] = peak["trees"] / peak["rows"]
    path = write_result(
        "prefix_tree_learning",
        config={"seeds": seeds, "layouts": list(LAYOUTS), "workers": args.workers,
                "overrides": common},
        metrics=result_metrics(metrics, runs, seeds, began),
        targets=TARGETS,
        notes=("GRPO on the embedded default, optim.layout=rows against trees from the same "
               "SFT start per seed (SFT itself runs on trees in both). Pool success is on the "
               "games RL trains on; held_out on new validation games. Intervals: 95% "
               "bootstraps over seeds x games; the paired difference is game by game under "
               "the same seed. peak_rss_mb: ru_maxrss of the run's own worker process."),
        quick=args.quick, runs=runs)
    print(path.read_text())


if __name__ == "__main__":
    run_script(main)
