"""Credit accuracy: every estimator's step credit against the solver and Monte Carlo truths, on
one batch from the embedded SFT start of an environment (docs/credit_check.md).

One ``agentcredit credit-check``
(``train.evaluation.credit_check.check.run_credit_check``) with every estimator that
runs on the batch (``DEFAULT_METHODS``: the backbones, VICT on each, VICT's six controls,
SALT, HCAPO, ProxMO, ADRS): ``--groups`` groups of 8 rollouts scored against the solver truth,
the first ``--mc-groups`` of them also against the Monte Carlo truth (K continuations),
the solver in a second process beside Monte Carlo (``--workers 2``). Metric names carry the
truth: ``solver/pooled/vict`` is VICT's pooled Spearman against the solver truth,
``solver/pooled/vict-grpo`` the paired difference VICT − GRPO, with ``.low`` / ``.high`` its 95%
interval over groups. ALFWorld writes ``credit_accuracy.json``; another ``--env`` writes
``credit_accuracy_<env>.json`` (``credit_accuracy_searchqa.json``,
``credit_accuracy_tau_retail.json``).

    python benchmarks/credit_accuracy.py [--env ENV] [--model SFT_DIR] [--groups G]
        [--mc-groups N] [--quick] [key=value ...]

Without ``--model`` the environment's embedded SFT start is trained first (minutes); the
``key=value`` settings apply to it and to the check.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path

import torch

from agentcredit.train.build import check_device
from agentcredit.train.evaluation.credit_check.check import (
    DEFAULT_METHODS,
    CreditCheckOptions,
    method_configs,
    run_credit_check,
)
from bench_common import (
    BenchmarkParser,
    at_least,
    model_folder,
    run_script,
    sft_start,
    write_result,
)

#: the paired differences the targets ask about: VICT against its backbone and its placebo
KEY_PAIRS = (("vict", "grpo"), ("vict", "random_edges"))
#: what the solver truth is on each environment (docs/credit_check.md §2.1)
SOLVERS = {"alfworld": "the demonstrator's regret, 4 tie-breaks",
           "searchqa": "the hops left to reveal, then the answer",
           "tau-retail": "the golden calls and closing messages left, scripted user",
           "tau-airline": "the golden calls and closing messages left, scripted user"}


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="alfworld",
                        help="alfworld (default), searchqa, tau-retail or tau-airline")
    parser.add_argument("--model", default=None, type=model_folder,
                        help="the SFT start (a run's reference/)")
    # the defaults: ALFWorld's paired intervals within ±0.02 and the check within 30 minutes
    parser.add_argument("--groups", type=int, default=12, help="task groups (default 12)")
    parser.add_argument("--mc-groups", type=int, default=3,
                        help="groups the Monte Carlo truth covers (default 3)")
    parser.add_argument("--continuations", type=int, default=8, help="K (default 8)")
    parser.add_argument("--boots", type=int, default=1000, help="bootstrap draws (default 1000)")
    parser.add_argument("--threads", type=at_least(1), default=2,
                        help="torch threads of collection and credit (default 2)")
    parser.add_argument("--workers", type=int, default=2,
                        help="2 (default): the solver truth beside Monte Carlo; 1: after it")
    parser.add_argument("--quick", action="store_true", help="a smoke-sized run")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="settings for the SFT start and the check")
    args = parser.parse_args()
    try:  # the sizes' ranges are the credit check's own (agentcredit credit-check's)
        options = CreditCheckOptions(methods=DEFAULT_METHODS, groups=args.groups,
                                     mc_groups=args.mc_groups, continuations=args.continuations,
                                     boots=args.boots, workers=args.workers)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    if args.quick:
        options = dataclasses.replace(options, groups=4, mc_groups=1)
    groups, mc_groups = options.groups, options.mc_groups
    overrides = [f"env={args.env}", *args.overrides]
    checked = [*overrides, "run.progress=false", f"run.threads={args.threads}"]
    for config in method_configs(None, checked, DEFAULT_METHODS).values():
        check_device(config)  # a bad env, setting or device stops here, before the SFT start
    torch.set_num_threads(args.threads)
    if args.model:
        start = Path(args.model)
    else:
        root = Path(tempfile.mkdtemp(prefix="credit-accuracy-"))
        start = sft_start([f"run.output_dir={root}", "run.progress=false", *overrides], "sft")
    overrides = checked
    load_before = _load()
    began = time.perf_counter()
    result = run_credit_check(None, overrides, start, options)
    wall = time.perf_counter() - began
    data = result.to_dict()
    metrics: dict[str, float | None] = {
        "wall_s": wall, "steps": result.steps, "groups": result.groups,
        "mc_steps": result.truths["mc"].steps, "mc_groups": mc_groups,
        "mc_s_per_100_steps": data["mc_s_per_100_steps"],
        "solver_s_per_100_steps": data["solver_s_per_100_steps"],
        "mc_se_mean": result.truths["mc"].stats["se_mean"],
        "mc_split_half": result.truths["mc"].stats["split_half"],
        "rollout_success": result.success}
    for row in data["rows"]:
        key = f"{row['truth']}/{row['metric']}/{row['method']}"
        metrics[key], metrics[f"{key}.low"], metrics[f"{key}.high"] = (
            row["value"], row["low"], row["high"])
    for pair in data["pairs"]:
        key = f"{pair['truth']}/{pair['metric']}/{pair['method']}-{pair['versus']}"
        metrics[key], metrics[f"{key}.low"], metrics[f"{key}.high"] = (
            pair["diff"], pair["low"], pair["high"])
    half_widths = {f"{m}-{v}": (metrics[f"solver/pooled/{m}-{v}.high"]
                                - metrics[f"solver/pooled/{m}-{v}.low"]) / 2
                   for m, v in KEY_PAIRS}
    for name, width in half_widths.items():
        metrics[f"solver/pooled/{name}.half_width"] = width
    config = {"env": args.env, "overrides": args.overrides, "start": str(start),
              "methods": list(DEFAULT_METHODS), "groups": groups,
              "group_size": 8, "mc_groups": mc_groups, "continuations": args.continuations,
              "tie_breaks": options.tie_breaks, "boots": args.boots, "threads": args.threads,
              "workers": args.workers,
              "seed": options.seed, "load_before": load_before, "load_after": _load()}
    targets = {**({"wall_s": {"max": 1800}, "mc_s_per_100_steps": {"max": 300}}
                  if args.env == "alfworld" else {}),
               **{f"solver/pooled/{name}.half_width": {"max": 0.02} for name in half_widths}}
    notes = (f"One batch collected from the embedded SFT start ({args.env} train tasks, "
             "temperature and group size of the embedded default); every method's step "
             "advantages on that batch (ADRS: the mean of its token advantages over each step) "
             f"against the solver truth ({SOLVERS.get(args.env, 'the environment solver')}) on "
             "every step and the Monte Carlo truth (K fresh continuations per state, success "
             "probability) on the first mc_groups groups. Intervals: 95% bootstrap over "
             "groups; paired differences share the draws. wall_s covers collection, credit, "
             "both truths (the solver in a second process beside Monte Carlo when workers = 2) "
             "and the bootstrap; load_before / load_after: the 1/5/15-minute load averages; "
             "the 1800 s target is for ALFWorld on an idle 2-core machine.")
    name = "credit_accuracy" if args.env == "alfworld" else \
        f"credit_accuracy_{args.env.replace('-', '_')}"
    path = write_result(name, config, metrics, targets, notes, args.quick,
                        table={"rows": data["rows"], "pairs": data["pairs"],
                               "truths": data["truths"], "truth_stats": data["truth_stats"],
                               "seconds": data["seconds"],
                               "method_seconds": data["method_seconds"]})
    print(path)
    for key in ("wall_s", "steps", "groups", "mc_steps", "mc_s_per_100_steps",
                "solver_s_per_100_steps", "mc_split_half"):
        print(f"{key}: {metrics[key]}")
    for name, width in half_widths.items():
        print(f"solver/pooled/{name}: {metrics[f'solver/pooled/{name}']} ± {width}")


if __name__ == "__main__":
    run_script(main)
