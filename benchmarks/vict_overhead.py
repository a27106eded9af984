"""VICT credit overhead: time of one VICT credit computation for 128 rollouts x 50 steps x 8 atoms.

The batch is synthetic (``tests/credit/vict/synthetic.py``): 16 task groups of 8
rollouts, every rollout 50 steps, 8 atoms per task with random dependencies,
roles and timings, traced through the real ``trace_rollout``. The timed call is
the registered ``vict`` estimator on a prepared ``CreditBatch`` — backbone,
conformance gate, marginals, greedy cores, witnesses, correction, eligibility
check, ledger rows and diagnostics — exactly what a trainer calls per update.
The backbone alone is timed in the same loop, alternating, for the ratio.

``update_share_pct`` is VICT's share of a whole embedded update: real
``method=vict`` updates of the embedded default from an SFT warm start, with
the verifier tracing and the credit phase (VICT, its backbone and the batch
assembly) over the sum of all phases, median over updates. Without
``--model`` the embedded SFT warm start is trained first (several minutes).

    python benchmarks/vict_overhead.py [--quick] [--model SFT_DIR] [--updates N]
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentcredit.credit import CreditBatch, get_estimator
from agentcredit.credit.vict import VICTConfig
from bench_common import (
    BenchmarkParser,
    at_least,
    model_folder,
    phase_shares_pct,
    run_method,
    run_script,
    sft_start,
    write_result,
)

# the synthetic verifier lives with the tests that share it
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "credit" / "vict"))
from synthetic import synthetic_group

GROUPS, GROUP_SIZE, STEPS, ATOMS = 16, 8, 50, 8


def _batch(seed: int) -> tuple[CreditBatch, float]:
    """The synthetic batch and the median time to trace one rollout (ms)."""
    rng = random.Random(seed)
    traces, groups = [], []
    start = time.perf_counter()
    for g in range(GROUPS):
        traces += synthetic_group(f"task{g}", GROUP_SIZE, ATOMS, STEPS, rng, exact_length=True)
        groups += [g] * GROUP_SIZE
    trace_ms = 1000 * (time.perf_counter() - start) / len(traces)
    rewards = [[-0.1 if rng.random() < 0.05 else 0.0 for _ in range(t.num_steps - 1)]
               + [10.0 * t.v_score] for t in traces]
    return CreditBatch.from_lists(rewards, groups, traces=traces), trace_ms


def update_share_pct(model: str | None, updates: int, quick: bool) -> tuple[float, dict]:
    """Median share (%) of trace + credit in real embedded VICT updates, and the run's config."""
    root = Path(tempfile.mkdtemp(prefix="vict-overhead-"))
    common = [f"run.output_dir={root}", "run.progress=false", "run.eval_at_start=false",
              "run.eval_every=0", f"run.updates={updates}", f"run.checkpoint_every={updates}"]
    if quick:
        common += ["sft.epochs=1", "env.train_games_per_type=2", "env.valid_games_per_type=1",
                   "env.pool_games_per_type=1"]
    start = Path(model) if model else sft_start(common, "sft")
    records = [r for r in run_method(start, "vict", common, "vict") if r["kind"] == "update"]
    shares = []
    for record in records:
        phase = phase_shares_pct({k.removeprefix("time/"): v for k, v in record.items()
                                  if k.startswith("time/")})
        shares.append(phase["trace"] + phase["credit"])
    return statistics.median(shares), {"start": str(start), "updates": updates,
                                       "nonzero_steps_per_rollout": statistics.median(
                                           r["credit/vict/nonzero_steps_per_rollout"]
                                           for r in records)}


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("--model", default=None, type=model_folder,
                        help="SFT checkpoint for the embedded updates")
    parser.add_argument("--updates", type=at_least(1), default=None,
                        help="embedded VICT updates")
    args = parser.parse_args()
    repeats, warmup = (5, 2) if args.quick else (60, 5)
    batch, trace_ms = _batch(seed=0)
    metrics: dict[str, float] = {"trace_ms_per_rollout_50x8": trace_ms}
    extra: dict[str, float] = {}
    for backbone in ("grpo", "gigpo"):
        vict, base = get_estimator("vict"), get_estimator(backbone)
        config = VICTConfig(backbone=backbone)
        for _ in range(warmup):
            result = vict(batch, config)
            base(batch)
        vict_ms, base_ms, added_ms = [], [], []
        for _ in range(repeats):  # alternate the two so load drifts hit both alike
            start = time.perf_counter()
            result = vict(batch, config)
            vict_ms.append(1000 * (time.perf_counter() - start))
            added_ms.append(result.diagnostics["vict/credit_ms"])
            start = time.perf_counter()
            base(batch)
            base_ms.append(1000 * (time.perf_counter() - start))
        suffix = "" if backbone == "grpo" else f".{backbone}"
        metrics[f"credit_ms_128x50x8{suffix}"] = statistics.median(vict_ms)
        metrics[f"backbone_ms_128x50x8{suffix}"] = statistics.median(base_ms)
        metrics[f"vict_added_ms_128x50x8{suffix}"] = statistics.median(added_ms)
        # ratio of each alternating pair, then the median: robust to load drifting between pairs
        metrics[f"credit_over_backbone_ratio{suffix}"] = statistics.median(
            v / b for v, b in zip(vict_ms, base_ms, strict=True))
        extra[f"ledger_rows{suffix}"] = len(result.ledger_rows)
        extra[f"sparsity_pct{suffix}"] = result.diagnostics["vict/sparsity_pct"]
        extra[f"trigger_pct{suffix}"] = result.diagnostics["vict/trigger_pct"]
    metrics["update_share_pct"], embedded = update_share_pct(
        args.model, args.updates or (1 if args.quick else 5), args.quick)
    config = {"rollouts": GROUPS * GROUP_SIZE, "groups": GROUPS, "steps": STEPS, "atoms": ATOMS,
              "repeats": repeats, "warmup": warmup, "seed": 0, "vict": "VICTConfig() defaults",
              "batch_stats": extra, "embedded_updates": embedded}
    notes = ("Synthetic traces (tests/credit/vict/synthetic.py), not ALFWorld rollouts: 8 atoms "
             "with random DAG dependencies, every rollout 50 steps. credit_ms_128x50x8 is the "
             "median wall time of the whole `vict` estimator call (backbone included, plus "
             "ledger rows and diagnostics); vict_added_ms_128x50x8 is the part after the "
             "backbone (vict/credit_ms), excluding the ledger/diagnostics packaging; "
             "backbone_ms is the backbone alone, timed alternately in the same loop. Tracing "
             "(trace_ms_per_rollout_50x8) happens once per rollout on the rollout side and is "
             "not part of the credit time. update_share_pct is measured on real embedded VICT "
             "updates (tracing + credit phase over the whole update; config.embedded_updates). "
             "CPU shared with other jobs: medians.")
    targets = {"update_share_pct": {"max": 2}}
    path = write_result("vict_overhead", config, metrics, targets, notes, args.quick)
    print(path)
    for key, value in metrics.items():
        print(f"{key}: {value:.3f}")


if __name__ == "__main__":
    run_script(main)
