"""Whether a change that should change no behaviour did: a seeded run's metrics, before and after.

    python benchmarks/seeded_metrics.py --baseline REV [--layout trees|rows] [--keep]

Runs the same seeded 2-update ALFWorld runs (a one-layer tiny model on 12 train games: GRPO
with saved rollouts, VICT with the credit check every update, ADRS with its teacher pass, DAPO
with dynamic sampling) through ``agentcredit train`` twice: at this checkout and at git revision
REV (a temporary worktree), each in a subprocess with that tree's ``src/`` first on
``PYTHONPATH`` and this checkout as the working directory, so both read the same game cache.
Only keys both versions accept are set, so REV may predate a change of the config's layout.

Every logged number is compared except wall-clock ones (``time/*``, ``tokens/*_per_s``,
``sft/seconds``, ``*_ms``, ``*_s_per_100_steps``). Figures
(``benchmarks/results/seeded_metrics.json``): ``keys_compared``, ``max_abs_diff``,
``mismatches`` (the number of values that differ by more than ``TOLERANCE`` or are not equal),
the first few of them under ``first_mismatches``, and every ``case: key`` that differs at least
once under ``mismatched_keys`` (a key logged on one side only included). ``--layout`` sets
``optim.layout`` in every run (default ``trees``; ``rows`` writes ``seeded_metrics_rows.json``);
``--name`` names the result file instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import BenchmarkParser, git_revision, result_name, run_script, write_result

REPO = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-6
#: the run every case shares: seconds per update on one core
BASE = ("run.progress=false", "run.threads=1", "run.updates=2", "run.eval_every=1",
        "run.checkpoint_every=1", "run.seed=0", "env.train_games_per_type=2",
        "env.valid_games_per_type=1", "env.pool_games_per_type=0", "sft.epochs=2",
        "rollout.group_size=3", "rollout.tasks_per_update=2", "rollout.max_steps=6",
        "rollout.history_window=4", "eval.probes=0", "model.tiny.hidden_size=32",
        "model.tiny.num_hidden_layers=1", "model.tiny.num_attention_heads=2",
        "model.tiny.num_key_value_heads=1", "model.tiny.intermediate_size=64")
CASES = {
    "grpo": ("run.save_rollouts=1",),
    "vict": ("method=vict", "run.credit_check_every=1"),
    "adrs": ("method=adrs",),
    "dapo": ("method=dapo",),
}
WALL_CLOCK_SUFFIXES = ("_ms", "_s_per_100_steps", "_per_s")
WALL_CLOCK_KEYS = ("sft/seconds",)


def run_cases(tree: Path, out: Path, layout: str) -> dict[str, list[dict]]:
    """Every case's metrics records, run with ``tree``'s code under ``optim.layout=layout``."""
    env = {**os.environ, "PYTHONPATH": f"{tree / 'src'}", "OMP_NUM_THREADS": "1"}
    runs = {}
    for name, extra in CASES.items():
        command = [sys.executable, "-c",
                   "import sys; from agentcredit.cli import main; sys.exit(main(sys.argv[1:]))",
                   "train", *BASE, f"optim.layout={layout}", *extra, f"run.output_dir={out}",
                   f"run.name={name}"]
        print(f"{tree.name}: {name}", flush=True)
        subprocess.run(command, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
        lines = (out / name / "metrics.jsonl").read_text().splitlines()
        runs[name] = [json.loads(line) for line in lines]
    return runs


def wall_clock(key: str) -> bool:
    return (key.startswith("time/") or key in WALL_CLOCK_KEYS
            or key.endswith(WALL_CLOCK_SUFFIXES))


def compare(old: dict[str, list[dict]], new: dict[str, list[dict]]) -> dict:
    """``keys_compared``, ``max_abs_diff``, ``mismatches`` and the first mismatches."""
    compared, worst, mismatches, keys = 0, 0.0, [], set()
    for case in CASES:
        if len(old[case]) != len(new[case]):
            mismatches.append(f"{case}: {len(old[case])} records before, {len(new[case])} after")
            continue
        for before, after in zip(old[case], new[case], strict=True):
            where = f"{case} {before.get('kind')} {before.get('update')}"
            for key in sorted(set(before) ^ set(after)):
                mismatches.append(f"{where}: {key} only {'before' if key in before else 'after'}")
                keys.add(f"{case}: {key}")
            for key in sorted(set(before) & set(after)):
                if wall_clock(key):
                    continue
                compared += 1
                x, y = before[key], after[key]
                if isinstance(x, int | float) and isinstance(y, int | float):
                    worst = max(worst, abs(x - y))
                    if abs(x - y) <= TOLERANCE:
                        continue
                elif x == y:
                    continue
                mismatches.append(f"{where}: {key} {x!r} → {y!r}")
                keys.add(f"{case}: {key}")
    return {"keys_compared": compared, "max_abs_diff": worst, "mismatches": len(mismatches),
            "first_mismatches": mismatches[:20], "mismatched_keys": sorted(keys)}


def main() -> None:
    parser = BenchmarkParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", required=True, type=git_revision,
                        help="the git revision to compare with")
    parser.add_argument("--layout", choices=("trees", "rows"), default="trees",
                        help="optim.layout of every run (default %(default)s)")
    parser.add_argument("--name", default=None, type=result_name,
                        help="result file benchmarks/results/NAME.json (default: by --layout)")
    parser.add_argument("--keep", action="store_true", help="keep the runs and the worktree")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="seeded-metrics-"))
    baseline = scratch / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(baseline), args.baseline],
                   cwd=REPO, check=True, capture_output=True)
    try:
        old = run_cases(baseline, scratch / "runs-baseline", args.layout)
        new = run_cases(REPO, scratch / "runs-new", args.layout)
    finally:
        if not args.keep:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=REPO,
                           check=False)
    figures = compare(old, new)
    path = write_result(
        args.name or ("seeded_metrics" if args.layout == "trees" else "seeded_metrics_rows"),
        {"baseline": args.baseline, "cases": {k: list(v) for k, v in CASES.items()},
         "base_overrides": [*BASE, f"optim.layout={args.layout}"], "tolerance": TOLERANCE},
        figures, {"mismatches": {"max": 0}},
        "Seeded 2-update ALFWorld runs (tiny model) at the baseline revision and at this "
        "commit, every logged number compared except wall-clock ones.", quick=False)
    print(json.dumps(figures, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    run_script(main)
