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

``--groups`` and ``--continuations`` take one number for every environment or
``env=N,...`` (the others keep ``GROUPS`` / ``CONTINUATIONS``); ``--workers`` plays cells in
that many processes, the dearest first.

    python benchmarks/credit_regimes.py [--envs ENV,...] [--groups G | env=G,...]
        [--continuations K | env=K,...] [--workers W] [--quick] [key=value ...]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import torch

from agentcredit.train.evaluation.credit_regimes import (
    METHODS,
    PAPER_TABLE12_ALFWORLD,
    READINGS,
    CellOptions,
    regime_cell,
)
from bench_common import write_result

#: ε per environment: Search-QA and WebShop from a calibration on 80 episodes (20 tasks × 4
#: seeds) per ε; tau and ALFWorld re-calibrated on 160 (40 tasks × 4 seeds), since the first
#: grid left them at 59-100% success (docs/credit_check.md §6).
GRIDS = {"searchqa": (0.05, 0.15, 0.3, 0.45, 0.8),
         "webshop": (0.2, 0.3, 0.4, 0.5, 0.62),
         "tau-retail": (0.45, 0.57, 0.66, 0.78, 0.9),
         "tau-airline": (0.6, 0.72, 0.8, 0.87, 0.97),
         "alfworld": (0.44, 0.53, 0.62, 0.67, 0.75)}
#: groups per cell, sized from a measured cell cost so the whole grid fits 3600 s on 2 cores
GROUPS = {"searchqa": 256, "webshop": 96, "tau-retail": 64, "tau-airline": 64, "alfworld": 16}
#: Monte Carlo continuations K per state (ALFWorld's engine steps cost ~4 ms each)
CONTINUATIONS = {"searchqa": 8, "webshop": 8, "tau-retail": 8, "tau-airline": 8, "alfworld": 4}
#: the paired differences the half-width target is read on
KEY_PAIRS = (("vict", "grpo"), ("vict", "random_edges"), ("vict/gigpo", "gigpo"))
#: the paired differences written to the flat metrics: the key ones, SALT's, and each reading
#: against VICT and against GRPO
REPORTED_PAIRS = KEY_PAIRS + (("salt", "random_edges"),) + tuple(
    (r, versus) for r in READINGS for versus in ("vict", "grpo"))
KEY_METHODS = ("grpo", "rloo", "gigpo", "vict", "vict/gigpo", "random_edges", "salt", "proxmo",
               "dense_atom_reward", *READINGS)


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
        if (row["method"], row["versus"]) in REPORTED_PAIRS and row["metric"] in ("pooled",
                                                                                  "within"):
            key = (f"{prefix}/{row['truth']}/{row['metric']}/"
                   f"{row['method']}-{row['versus']}")
            out[key], out[key + ".low"], out[key + ".high"] = (row["diff"], row["low"],
                                                               row["high"])
    widths = [(p["high"] - p["low"]) / 2 for p in cell["pairs"]
              if p["metric"] == "pooled" and p["low"] is not None]
    out[f"{prefix}/max_pooled_pair_halfwidth"] = max(widths) if widths else None
    key = [(p["high"] - p["low"]) / 2 for p in cell["pairs"]
           if p["metric"] == "pooled" and (p["method"], p["versus"]) in KEY_PAIRS
           and p["low"] is not None]
    out[f"{prefix}/key_pooled_pair_halfwidth"] = max(key) if key else None
    for name, value in cell["table12"]["vict"].items():
        out[f"{prefix}/table12/{name}"] = value
    return out


def per_env(value: str, defaults: dict[str, int], flag: str) -> dict[str, int]:
    """``--groups`` / ``--continuations``: one number for every environment, or ``env=N,...``
    over ``defaults``."""
    if "=" not in value:
        return dict.fromkeys(defaults, int(value))
    out = dict(defaults)
    for item in value.split(","):
        env, _, n = item.partition("=")
        if env not in defaults or not n.isdigit():
            raise SystemExit(f"{flag} {value!r}: {item!r} is not env=N with env one of "
                             f"{', '.join(defaults)}")
        out[env] = int(n)
    return out


def run_cell(job: tuple[str, float, CellOptions, list[str]]) -> dict:
    """One cell in a worker process (one torch thread: the workers share the cores)."""
    torch.set_num_threads(1)
    env, eps, options, overrides = job
    began = time.perf_counter()
    cell = regime_cell(env, eps, options, overrides)
    cell["wall_s"] = time.perf_counter() - began
    return cell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default=",".join(GRIDS), help="comma-separated environments")
    parser.add_argument("--groups", default="", help="G, or env=G,... (default GROUPS)")
    parser.add_argument("--mc-groups", type=int, default=0, help="0: every group")
    parser.add_argument("--continuations", default="",
                        help="K, or env=K,... (default CONTINUATIONS)")
    parser.add_argument("--workers", type=int, default=1, help="cells played at once")
    parser.add_argument("--boots", type=int, default=500)
    parser.add_argument("--name", default="credit_regimes", help="the result file's name")
    parser.add_argument("--quick", action="store_true", help="4 groups, K = 2, 50 draws")
    parser.add_argument("overrides", nargs="*", help="key=value config settings")
    args = parser.parse_args()
    envs = args.envs.split(",")
    unknown = [e for e in envs if e not in GRIDS]
    if unknown:
        raise SystemExit(f"--envs: {unknown} unknown; choose from {', '.join(GRIDS)}")
    groups = per_env(args.groups, GROUPS, "--groups") if args.groups else dict(GROUPS)
    ks = (per_env(args.continuations, CONTINUATIONS, "--continuations") if args.continuations
          else dict(CONTINUATIONS))
    options = {e: (CellOptions(groups=4, continuations=2, boots=50) if args.quick else
                   CellOptions(groups=groups[e], mc_groups=args.mc_groups,
                               continuations=ks[e], boots=args.boots)) for e in envs}
    grid = [(e, eps) for e in envs for eps in GRIDS[e]]
    # the dearest cells first (ALFWorld, then the highest ε), so the workers finish together
    cost = {e: i for i, e in enumerate(("searchqa", "tau-airline", "tau-retail", "webshop",
                                        "alfworld"))}
    jobs = sorted(((e, eps, options[e], args.overrides) for e, eps in grid),
                  key=lambda j: (cost[j[0]], j[1]), reverse=True)
    began = time.perf_counter()
    done: dict[tuple[str, float], dict] = {}
    config = {"envs": args.envs, "groups": {e: options[e].groups for e in envs},
              "mc_groups": args.mc_groups,
              "continuations": {e: options[e].continuations for e in envs},
              "boots": args.boots if not args.quick else 50, "workers": args.workers,
              "tie_breaks": CellOptions.tie_breaks, "methods": list(METHODS),
              "readings": {r: list(v[0]) for r, v in READINGS.items()},
              "grids": {e: GRIDS[e] for e in envs}, "overrides": args.overrides}
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.workers) as pool:
        for cell in pool.imap_unordered(run_cell, jobs):
            done[(cell["env"], cell["epsilon"])] = cell
            wall = time.perf_counter() - began
            cells = [done[k] for k in grid if k in done]
            metrics = {}
            for c in cells:
                metrics.update(cell_metrics(c))
            metrics["wall_s"] = wall
            print(f"[{len(done)}/{len(grid)} {wall:.0f} s] {cell['env']} ε={cell['epsilon']:g}: "
                  f"success {cell['success_rate']:.3f}, {cell['groups']} groups, "
                  f"{cell['steps']} steps, {cell['wall_s']:.0f} s", flush=True)
            # written after every cell, so a run cut short keeps what it measured
            path = write_result(
                args.name, config, metrics,
                {"wall_s": "<= 3600 on 2 cores", "key paired half-width": "<= 0.02"},
                "Scripted ε policies (rollout/scripted.py); truths: solver regret and Monte Carlo "
                "A^π of the same policy. key_pooled_pair_halfwidth: the widest of "
                "vict-grpo, vict-random_edges, vict/gigpo-gigpo (pooled, either truth). The "
                "paper's Table 12 (ALFWorld) is under paper_table12.",
                args.quick, cells=cells, cells_done=len(cells), cells_planned=len(grid),
                paper_table12=PAPER_TABLE12_ALFWORLD)
    wall = metrics["wall_s"]
    print(f"wrote {path} ({wall:.0f} s)")


if __name__ == "__main__":
    multiprocessing.freeze_support()
    main()
