"""Trainer throughput on the embedded default: rollout, scoring, credit and optimiser per update.

Real RL updates of the embedded default (tiny model, generated small rooms,
24 rollouts of up to 20 steps per update) from one SFT warm start, one run per
method, no evaluation. Per method, the medians over updates of:

- ``rollout_steps_per_s``: environment steps (one generated action each) per
  second of the rollout phase;
- ``generated_tokens_per_s``: sampled response tokens per second of rollout;
- ``trained_tokens_per_s``: loss tokens per second of the optimiser phase
  (every PPO epoch and mini-batch);
- ``<phase>_share_pct``: share of the update's wall time in each phase
  (rollout, score = old and reference log-probs, teacher = ADRS rescoring,
  hindsight = HCAPO's rescoring with the final observation in the prompt,
  trace = verifier tracing, credit = the estimator, optimiser = the PPO step);
- ``update_s``: wall time of one whole update;
- ``hcapo_extra_pass_share_pct``: HCAPO's hindsight pass as a share of its update
  (``hindsight_share_pct.hcapo``; the HCAPO paper reports +8.3% of training time).

    python benchmarks/trainer_throughput.py [--quick] [--model SFT_DIR]
        [--methods grpo,gigpo,vict/grpo,adrs/grpo/L2,hcapo] [--updates N] [key=value ...]

Without ``--model`` the embedded SFT warm start is trained first (several
minutes); pass a checkpoint (a run's ``reference`` directory) to skip it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench_common import phase_shares_pct, run_method, sft_start, write_result

DEFAULT_METHODS = "grpo,gigpo,vict/grpo,adrs/grpo/L2,hcapo"
HCAPO_PAPER_EXTRA_PCT = 8.3  # the HCAPO paper's extra training time of its hindsight pass


def summarise(updates: list[dict]) -> dict[str, float]:
    """Medians over the updates of one run (see the module docstring for the names)."""
    rows = []
    for record in updates:
        # the loop's "update" phase is the optimiser; "update" here means the whole update
        phases = {k.removeprefix("time/").replace("update", "optimiser"): v
                  for k, v in record.items() if k.startswith("time/")}
        rows.append({
            "rollout_steps_per_s": record["rollout/steps"] / phases["rollout"],
            "generated_tokens_per_s": record["tokens/generated_per_s"],
            "trained_tokens_per_s": record["tokens/trained_per_s"],
            "update_s": sum(phases.values()),
            **{f"{phase}_share_pct": share for phase, share in phase_shares_pct(phases).items()},
        })
    return {key: statistics.median(row.get(key, 0.0) for row in rows)
            for key in sorted({k for row in rows for k in row})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("--model", default=None, help="SFT checkpoint to start from")
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--updates", type=int, default=None, help="updates per method")
    parser.add_argument("--output-dir", default=None, help="where runs go (default: a temp dir)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    methods = args.methods.split(",")
    updates = args.updates or (1 if args.quick else 5)
    root = Path(args.output_dir or tempfile.mkdtemp(prefix="trainer-throughput-"))
    common = [f"run.output_dir={root}", "run.progress=false", "run.eval_at_start=false",
              "run.eval_every=0", f"run.updates={updates}", f"run.checkpoint_every={updates}",
              *args.overrides]
    if args.quick:
        common += ["sft.epochs=1", "env.train_games_per_type=2", "env.valid_games_per_type=1",
                   "env.pool_games_per_type=1"]
    began = time.perf_counter()
    start = Path(args.model) if args.model else sft_start(common, "sft")
    metrics: dict[str, float] = {}
    for method in methods:
        records = run_method(start, method, common, method.replace("/", "-"))
        summary = summarise([r for r in records if r["kind"] == "update"])
        metrics.update({f"{key}.{method}": round(value, 3) for key, value in summary.items()})
        print(f"{method}: {summary['update_s']:.1f} s/update, "
              f"{summary['rollout_steps_per_s']:.1f} steps/s", flush=True)
    if "hindsight_share_pct.hcapo" in metrics:
        metrics["hcapo_extra_pass_share_pct"] = metrics["hindsight_share_pct.hcapo"]
        print(f"hcapo: hindsight pass {metrics['hcapo_extra_pass_share_pct']:.1f}% of an update "
              f"(paper: +{HCAPO_PAPER_EXTRA_PCT}%)", flush=True)
    path = write_result(
        "trainer_throughput",
        config={"methods": methods, "updates": updates, "start": str(start), "overrides": common},
        metrics=metrics,
        targets={},
        notes=("Embedded default (presets/embedded.yaml): tiny Qwen2 model, 3 tasks x 8 rollouts "
               "per update, up to 20 steps, bare actions, CPU threads=2. Medians over updates "
               "of one run per method from one SFT start; phases are measured inside the loop "
               "(metrics.jsonl time/*). Phase shares are of the summed phase times. "
               "HCAPO's hindsight pass rescores every response token once more (the ADRS "
               f"teacher pass with the final observation); its paper reports "
               f"+{HCAPO_PAPER_EXTRA_PCT}% training time on 7B models with vLLM rollouts. "
               f"Wall time {time.perf_counter() - began:.0f} s."),
        quick=args.quick)
    print(path)


if __name__ == "__main__":
    main()
