"""Credit regimes: every credit method that needs no language model against both truths, on
scripted policies of chosen skill ε, per environment and success rate (docs/credit_check.md
§5; ``train.evaluation.credit_regimes``).

For each environment and each ``ε`` of its grid (chosen so that the measured success rates
fall near 90, 70, 50, 30 and 10%; the rates are measured again in every cell), ``--groups``
groups of 8 rollouts of the ε policy are scored against the solver truth and the Monte Carlo
truth (``--continuations`` continuations of the same policy per state). Metric names:
``<env>/<eps>/<truth>/<metric>/<method>``, a paired difference
``…/<method>-<versus>`` with ``.low`` / ``.high`` its 95% interval over groups; every cell's
full table and VICT's Table-12 rows are under ``cells``.

    python benchmarks/credit_regimes.py [--envs ENV,...] [--groups G] [--continuations K]
        [--quick] [key=value ...]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

from agentcredit.train.evaluation.credit_regimes import (
    METHODS,
    PAPER_TABLE12_ALFWORLD,
    CellOptions,
    regime_cell,
)
from bench_common import write_result

#: ε per environment, from a calibration on 80 episodes (20 tasks × 4 seeds) per ε.
GRIDS = {"searchqa": (0.05, 0.15, 0.3, 0.45, 0.8),
         "webshop": (0.2, 0.3, 0.4, 0.5, 0.62),
         "tau-retail": (0.35, 0.5, 0.57, 0.65, 0.75),
         "tau-airline": (0.6, 0.72, 0.8, 0.9, 0.97),
         "alfworld": (0.05, 0.15, 0.3, 0.45, 0.6)}
KEY_PAIRS = (("vict", "grpo"), ("vict", "random_edges"), ("vict/gigpo", "gigpo"),
             ("salt", "random_edges"))
KEY_METHODS = ("grpo", "rloo", "gigpo", "vict", "vict/gigpo", "random_edges", "salt", "proxmo",
               "dense_atom_reward")


def cell_metrics(cell: dict) -> dict:
    """The flat headline metrics of one cell."""
    prefix = f"{cell['env']}/{cell['epsilon']:g}"
    out = {f"{prefix}/success_rate": cell["success_rate"]}
    for row in cell["rows"]:
        if row["metric"] in ("pooled", "within") and row["method"] in KEY_METHODS + ("random",):
            key = f"{prefix}/{row['truth']}/{row['metric']}/{row['method']}"
            out[key], out[key + ".low"], out[key + ".high"] = (row["value"], row["low"],
                                                               row["high"])
    for row in cell["pairs"]:
        if (row["method"], row["versus"]) in KEY_PAIRS and row["metric"] in ("pooled",
                                                                             "within"):
            key = (f"{prefix}/{row['truth']}/{row['metric']}/"
                   f"{row['method']}-{row['versus']}")
            out[key], out[key + ".low"], out[key + ".high"] = (row["diff"], row["low"],
                                                               row["high"])
    widths = [(p["high"] - p["low"]) / 2 for p in cell["pairs"]
              if p["metric"] == "pooled" and p["low"] is not None]
    out[f"{prefix}/max_pooled_pair_halfwidth"] = max(widths) if widths else None
    for name, value in cell["table12"]["vict"].items():
        out[f"{prefix}/table12/{name}"] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="searchqa,webshop,tau-retail,tau-airline",
                        help="comma-separated environments (alfworld too, slowly)")
    parser.add_argument("--groups", type=int, default=32)
    parser.add_argument("--mc-groups", type=int, default=0, help="0: every group")
    parser.add_argument("--continuations", type=int, default=8)
    parser.add_argument("--boots", type=int, default=500)
    parser.add_argument("--name", default="credit_regimes", help="the result file's name")
    parser.add_argument("--quick", action="store_true", help="4 groups, K = 2, 50 draws")
    parser.add_argument("overrides", nargs="*", help="key=value config settings")
    args = parser.parse_args()
    options = (CellOptions(groups=4, continuations=2, boots=50) if args.quick else
               CellOptions(groups=args.groups, mc_groups=args.mc_groups,
                           continuations=args.continuations, boots=args.boots))
    began = time.perf_counter()
    envs = args.envs.split(",")
    planned = sum(len(GRIDS[e]) for e in envs)
    cells, metrics = [], {}
    for env in envs:
        for eps in GRIDS[env]:
            cell = regime_cell(env, eps, options, args.overrides)
            cells.append(cell)
            metrics.update(cell_metrics(cell))
            metrics["wall_s"] = time.perf_counter() - began
            print(f"{env} ε={eps:g}: success {cell['success_rate']:.3f}, {cell['steps']} steps, "
                  f"{sum(cell['seconds'].values()):.0f} s", flush=True)
            # written after every cell, so a run cut short keeps what it measured
            path = write_result(
                args.name,
                {"envs": args.envs, "groups": options.groups, "mc_groups": options.mc_groups,
                 "continuations": options.continuations, "boots": options.boots,
                 "tie_breaks": options.tie_breaks, "methods": list(METHODS),
                 "grids": {e: GRIDS[e] for e in envs}, "overrides": args.overrides},
                metrics, {"wall_s": "<= 3600 on 2 cores", "paired half-width": "<= 0.02"},
                "Scripted ε policies (rollout/scripted.py); truths: solver regret and Monte Carlo "
                "A^π of the same policy. The paper's Table 12 (ALFWorld) is under "
                "paper_table12.",
                args.quick, cells=cells, cells_done=len(cells), cells_planned=planned,
                paper_table12=PAPER_TABLE12_ALFWORLD)
    wall = metrics["wall_s"]
    print(f"wrote {path} ({wall:.0f} s)")


if __name__ == "__main__":
    multiprocessing.freeze_support()
    main()
