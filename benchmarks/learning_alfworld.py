"""Learning on generated ALFWorld: methods compared from the same SFT start and rollout budget.

For each seed, one SFT warm start is trained (the embedded default's model and
SFT) and every method then runs the same number of RL updates from it, with
the same rollouts per update and the same evaluation schedule. Curves are the
evaluations in each run's ``metrics.jsonl``.

    python benchmarks/learning_alfworld.py [--quick] [--methods grpo,vict/gigpo,adrs/gigpo/L3]
        [--seeds 0,1,2] [--updates N] [--output-dir DIR] [key=value ...]

A method is ``NAME[/BACKBONE[/GATE]]``: ``vict/gigpo`` = VICT on GiGPO's
step-level advantage, ``adrs/gigpo/L3`` = ADRS+TVA on GiGPO, ``skill_grpo``,
``sdar``. Extra ``key=value`` overrides go to every run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

from agentcredit.train.config import load_config
from agentcredit.train.loop import train
from bench_common import write_result

DEFAULT_METHODS = "grpo,gigpo,vict/grpo,vict/gigpo,adrs/grpo/L2,adrs/gigpo/L3,skill_grpo,sdar"


def _evals(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "eval"]


def _curve(evals: list[dict]) -> list[dict]:
    return [{"update": r["update"], "success": r["eval/success"],
             **{k.removeprefix("eval/").replace("/", "_"): v for k, v in r.items()
                if k.startswith("eval/") and k.endswith("/success") and k.count("/") == 2}}
            for r in evals]


def _auc_pct(curve: list[dict]) -> float:
    """Area under the success curve over updates, as a percentage of the full box."""
    if len(curve) < 2:
        return 100.0 * curve[0]["success"] if curve else 0.0
    area = sum((b["update"] - a["update"]) * (a["success"] + b["success"]) / 2
               for a, b in itertools.pairwise(curve))
    return 100.0 * area / (curve[-1]["update"] - curve[0]["update"])


def method_overrides(method: str) -> list[str]:
    """``NAME[/BACKBONE[/GATE]]`` -> ``method=NAME`` plus the estimator options."""
    name, *rest = method.split("/")
    extra = [f"method={name}"]
    for key, value in zip(("backbone", "gate"), rest, strict=False):
        extra.append(f"credit.options.{key}={value}")
    return extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--seeds", default=None, help="comma-separated (full: 0,1,2; quick: 0)")
    parser.add_argument("--updates", type=int, default=None, help="RL updates per run")
    parser.add_argument("--output-dir", default=None, help="where runs go (default: a temp dir)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    methods = args.methods.split(",")
    seeds = [int(s) for s in (args.seeds or ("0" if args.quick else "0,1,2")).split(",")]
    updates = args.updates or (2 if args.quick else 20)
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="learning-alfworld-"))
    common = [f"run.output_dir={root}", "run.progress=false", f"run.updates={updates}",
              f"run.eval_every={max(1, updates // 4)}", f"run.checkpoint_every={updates}",
              *args.overrides]
    if args.quick:
        common += ["env.valid_games_per_type=1", "rollout.tasks_per_update=2"]
    runs = []
    began = time.perf_counter()
    for seed in seeds:
        start = train(load_config(None, [*common, f"run.seed={seed}", f"run.name=sft_seed{seed}",
                                         "run.updates=0", "run.eval_at_start=false"]),
                      echo=lambda _: None).run_dir / "reference"
        for method in methods:
            config = load_config(None, [*common, f"run.seed={seed}", f"model.name={start}",
                                        "sft.enabled=false", (f"run.name={method.replace('/', '-')}"
                                        f"_seed{seed}"), *method_overrides(method)])
            print(f"seed {seed}: {method} ...", file=sys.stderr, flush=True)
            result = train(config, echo=lambda _: None)
            curve = _curve(_evals(result.run_dir))
            name, _, backbone = method.partition("/")
            runs.append({"method": method, "backbone": backbone.split("/")[0] or name, "seed": seed,
                         "curve": curve, "final": curve[-1] if curve else {}})
    metrics = {}
    for method in methods:
        mine = [r for r in runs if r["method"] == method]
        metrics[f"success_final_mean.{method}"] = sum(r["final"]["success"] for r in mine) / len(mine)
        metrics[f"success_auc_mean.{method}"] = sum(_auc_pct(r["curve"]) for r in mine) / len(mine)
        metrics[f"success_start_mean.{method}"] = sum(r["curve"][0]["success"]
                                                      for r in mine) / len(mine)
    path = write_result(
        "learning_alfworld",
        config={"methods": methods, "seeds": seeds, "updates": updates, "overrides": common},
        metrics={k: round(v, 4) for k, v in metrics.items()},
        targets={},
        notes=("Embedded default (tiny model, generated small rooms) unless overridden; every "
               "method starts from the same SFT checkpoint per seed and gets the same rollout "
               f"budget. Generated games are not comparable with published ALFWorld numbers. "
               f"Wall time {time.perf_counter() - began:.0f} s."),
        quick=args.quick, runs=runs)
    print(path.read_text())


if __name__ == "__main__":
    main()
