"""Credit regimes: every credit method that needs no language model against both truths, on
scripted policies of chosen skill ε, per environment and success rate (docs/credit_check.md
§6; ``train.evaluation.credit_check.regimes``).

For each environment and each ``ε`` of its grid (chosen so that the measured success rates
fall near 90, 70, 50, 30 and 10%; the rates are measured again in every cell), ``--groups``
groups of 8 rollouts of the ε policy are scored against the solver truth and the Monte Carlo
truth (``--continuations`` continuations of the same policy per state). Metric names:
``<env>/<eps>/<truth>/<metric>/<method>``, a paired difference
``…/<method>-<versus>`` with ``.low`` / ``.high`` its 95% interval over groups; every cell's
full table and VICT's Table-12 rows are under ``cells``. The sign agreement of each VICT
variant's correction and of its base at the corrected steps is
``<env>/<eps>/<truth>/corrected_sign/<method>/{correction,base,diff}``; VICT's Table-12 row at
the cell nearest the success rate of the paper's policy, beside the paper's with the ratio
ours / paper, is under ``table12_vs_paper``. ``<name>.svg`` beside the result is the picture
of pooled ρ against success rate (``figure_svg``; ``--figure`` redraws it from a result).

``--groups`` and ``--continuations`` take one number for every environment or
``env=N,...`` (the others keep ``GROUPS`` / ``CONTINUATIONS``); ``--workers`` plays cells in
that many processes, the dearest first. ``--into NAME`` writes the cells played into an earlier
result ``NAME.json`` instead: each replaces the cell of its environment and ε there, the other
cells stay, and the config lists every run that wrote cells (``runs``).

    python benchmarks/credit_regimes.py [--envs ENV,...] [--groups G | env=G,...]
        [--continuations K | env=K,...] [--workers W] [--into NAME] [--quick] [key=value ...]
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time

import torch

from agentcredit.config import load_config
from agentcredit.train.evaluation.credit_check.regimes import (
    METHODS,
    PAPER_TABLE12,
    READINGS,
    CellOptions,
    regime_cell,
    table12_vs_paper,
)
from bench_common import RESULTS, BenchmarkParser, result_name, run_script, write_result

#: ε per environment: Search-QA and WebShop from a calibration on 80 episodes (20 tasks × 4
#: seeds) per ε; tau and ALFWorld re-calibrated on 160 (40 tasks × 4 seeds), since the first
#: grid left them at 59-100% success (docs/credit_check.md §6).
GRIDS = {"searchqa": (0.05, 0.15, 0.3, 0.45, 0.8),
         "webshop": (0.2, 0.3, 0.4, 0.5, 0.62),
         "tau-retail": (0.45, 0.57, 0.66, 0.78, 0.9),
         "tau-airline": (0.6, 0.72, 0.8, 0.87, 0.97),
         "alfworld": (0.44, 0.53, 0.62, 0.67, 0.75)}
#: groups per cell, sized from a measured cell cost so the whole grid fits 3600 s on 2 cores
GROUPS = {"searchqa": 256, "webshop": 96, "tau-retail": 64, "tau-airline": 64, "alfworld": 12}
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
    for row in cell["corrected"]:
        key = f"{prefix}/{row['truth']}/corrected_sign/{row['method']}"
        out[f"{key}/steps"] = row["steps"]
        for name in ("correction", "base"):
            out[f"{key}/{name}"], out[f"{key}/{name}.low"], out[f"{key}/{name}.high"] = (
                row[name], row[f"{name}_low"], row[f"{name}_high"])
        out[f"{key}/diff"], out[f"{key}/diff.low"], out[f"{key}/diff.high"] = (
            row["diff"], row["low"], row["high"])
    for name, value in cell["table12"]["vict"].items():
        if isinstance(value, float):  # the top reason's name stays in the cell's row
            out[f"{prefix}/table12/{name}"] = value
    return out


#: the methods of the figure, with their colours
FIGURE_METHODS = {"grpo": "#555555", "gigpo": "#1f77b4", "vict": "#d62728",
                  "vict/gigpo": "#ff7f0e", "random_edges": "#9467bd", "salt": "#2ca02c"}
PANEL_W, PANEL_H, MARGIN = 220, 170, 40


def figure_svg(cells: list[dict]) -> str:
    """One picture (issue 47, item 5): per environment (columns) and truth (rows: Monte Carlo,
    solver), each ``FIGURE_METHODS`` method's pooled ρ against the group success rate, with
    its 95% interval as a vertical bar; an SVG document."""
    envs = list(dict.fromkeys(c["env"] for c in cells))
    truths = ("mc", "solver")
    bars = [r for c in cells for r in c["rows"] if r["metric"] == "pooled"
            and r["method"] in FIGURE_METHODS and r["low"] is not None]
    y_lo = min([0.0, *(r["low"] for r in bars)])
    y_hi = max([0.1, *(r["high"] for r in bars)])
    width = MARGIN + len(envs) * (PANEL_W + MARGIN)
    height = MARGIN + len(truths) * (PANEL_H + MARGIN) + 30
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif" font-size="10">'),
           f'<rect width="{width}" height="{height}" fill="white"/>']
    for col, env in enumerate(envs):
        for row, truth in enumerate(truths):
            x0, y0 = MARGIN + col * (PANEL_W + MARGIN), MARGIN + row * (PANEL_H + MARGIN)

            def px(rate: float, x0: int = x0) -> float:
                return x0 + rate * PANEL_W

            def py(rho: float, y0: int = y0) -> float:
                return y0 + PANEL_H * (y_hi - rho) / (y_hi - y_lo)

            out.append(f'<rect x="{x0}" y="{y0}" width="{PANEL_W}" height="{PANEL_H}" '
                       'fill="none" stroke="#999"/>')
            out.append(f'<line x1="{x0}" x2="{x0 + PANEL_W}" y1="{py(0.0):.1f}" '
                       f'y2="{py(0.0):.1f}" stroke="#ccc"/>')
            out.append(f'<text x="{x0 + 4}" y="{y0 - 6}">{env}: pooled ρ vs {truth} truth'
                       '</text>')
            for tick in (0.0, 0.5, 1.0):
                out.append(f'<text x="{px(tick) - 8:.1f}" y="{y0 + PANEL_H + 12}">{tick:g}'
                           '</text>')
            for tick in (y_lo, 0.0, y_hi):
                out.append(f'<text x="{x0 - 30}" y="{py(tick) + 3:.1f}">{tick:.2f}</text>')
            for k, (method, colour) in enumerate(FIGURE_METHODS.items()):
                points = []
                for cell in sorted((c for c in cells if c["env"] == env),
                                   key=lambda c: c["success_rate"]):
                    (r,) = [r for r in cell["rows"] if r["method"] == method
                            and r["truth"] == truth and r["metric"] == "pooled"]
                    if r["value"] is None:
                        continue
                    x = px(cell["success_rate"]) + (k - 2.5) * 2  # methods side by side
                    points.append(f"{x:.1f},{py(r['value']):.1f}")
                    if r["low"] is not None:
                        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{py(r["low"]):.1f}" '
                                   f'y2="{py(r["high"]):.1f}" stroke="{colour}"/>')
                    out.append(f'<circle cx="{x:.1f}" cy="{py(r["value"]):.1f}" r="2" '
                               f'fill="{colour}"><title>{method} {env} {truth} success '
                               f'{cell["success_rate"]:.2f}: {r["value"]:.3f}</title></circle>')
                out.append(f'<polyline points="{" ".join(points)}" fill="none" '
                           f'stroke="{colour}" stroke-width="1"/>')
    legend_y = height - 14
    out.append(f'<text x="{MARGIN}" y="{legend_y}">x: group success rate; bars: 95% intervals '
               'over groups</text>')
    for k, (method, colour) in enumerate(FIGURE_METHODS.items()):
        x = MARGIN + 300 + k * 90
        out.append(f'<rect x="{x}" y="{legend_y - 8}" width="10" height="10" '
                   f'fill="{colour}"/><text x="{x + 14}" y="{legend_y}">{method}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def format_table12_vs_paper(side: dict[str, dict]) -> str:
    """``table12_vs_paper``'s rows as text: per environment, ours, the paper's and the ratio."""
    lines = []
    for env, row in side.items():
        lines.append(f"Table 12, {env}: our cell ε={row['epsilon']:g} at "
                     f"{100 * row['success_rate']:.0f}% success, the paper's policy at "
                     f"{100 * row['paper_success']:.1f}%")
        lines.append(f"  {'':<30}{'ours':>8}{'paper':>8}{'ratio':>8}")
        for key, ratio in row["ratio"].items():
            lines.append(f"  {key:<30}{row['ours'][key]:>8.2f}{row['paper'][key]:>8.2f}"
                         f"{ratio:>8.2f}")
        lines.append(f"  {'top fact reason':<30}{row['ours']['abstain_fact_top_reason']}  |  "
                     f"{row['paper']['top_reason']}")
    return "\n".join(lines)


def per_env(value: str, defaults: dict[str, int], flag: str) -> dict[str, int]:
    """``--groups`` / ``--continuations``: one number for every environment, or ``env=N,...``
    over ``defaults``."""
    if "=" not in value:
        if not value.removeprefix("-").isdigit():
            raise SystemExit(f"{flag} {value!r}: not a number N, nor env=N,...")
        return dict.fromkeys(defaults, int(value))
    out = dict(defaults)
    for item in value.split(","):
        env, _, n = item.partition("=")
        if env not in defaults or not n.isdigit():
            raise SystemExit(f"{flag} {value!r}: {item!r} is not env=N with env one of "
                             f"{', '.join(defaults)}")
        out[env] = int(n)
    return out


def chosen_epsilons(value: str, envs: list[str]) -> dict[str, tuple[float, ...]]:
    """``--eps``: per environment of ``envs``, the ε of its grid to play; ``env=ε/ε,...`` keeps
    only the named cells of the named environments (the others keep their whole grid)."""
    chosen = {e: GRIDS[e] for e in envs}
    for item in filter(None, value.split(",")):
        env, _, values = item.partition("=")
        try:
            picked = tuple(float(v) for v in values.split("/"))
        except ValueError:
            picked = ()
        if env not in chosen or not picked or not set(picked) <= set(GRIDS[env]):
            raise SystemExit(f"--eps {value!r}: {item!r} is not env=ε/ε/... with env one of "
                             f"{', '.join(envs)} and each ε in its grid")
        chosen[env] = picked
    return chosen


def earlier_cells(name: str, grid: list[tuple[str, float]]) -> tuple[list[dict], list[dict]]:
    """The cells of the result ``NAME.json`` that ``grid`` does not replay, and the configs of
    the runs that wrote it (``--into``)."""
    source = RESULTS / f"{name}.json"
    try:
        result = json.loads(source.read_text())
        cells, config = result["cells"], result["config"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"--into: cannot read the cells of {source} "
                         f"({type(err).__name__}: {err}); give an earlier result's name") from None
    replayed = set(grid)
    kept = [c for c in cells if (c["env"], c["epsilon"]) not in replayed]
    return kept, list(config.get("runs", [config]))


def run_cell(job: tuple[str, float, CellOptions, list[str]]) -> dict:
    """One cell in a worker process (one torch thread: the workers share the cores)."""
    torch.set_num_threads(1)
    env, eps, options, overrides = job
    began = time.perf_counter()
    cell = regime_cell(env, eps, options, overrides)
    cell["wall_s"] = time.perf_counter() - began
    return cell


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default=",".join(GRIDS), help="comma-separated environments")
    parser.add_argument("--eps", default="",
                        help="only these cells of the grids: env=ε/ε/...,... (default: all)")
    parser.add_argument("--groups", default="", help="G, or env=G,... (default GROUPS)")
    parser.add_argument("--mc-groups", type=int, default=0, help="0: every group")
    parser.add_argument("--continuations", default="",
                        help="K, or env=K,... (default CONTINUATIONS)")
    parser.add_argument("--workers", type=int, default=1, help="cells played at once")
    parser.add_argument("--boots", type=int, default=500)
    parser.add_argument("--name", default="credit_regimes", type=result_name,
                        help="the result file's name, in benchmarks/results/")
    parser.add_argument("--into", type=result_name, default=None,
                        help="replace these cells in the earlier result NAME.json, keep its others")
    parser.add_argument("--quick", action="store_true", help="4 groups, K = 2, 50 draws")
    parser.add_argument("--figure", action="store_true",
                        help="only write NAME.svg from the result file NAME.json")
    parser.add_argument("overrides", nargs="*", help="key=value config settings")
    args = parser.parse_args()
    if args.figure:
        source = RESULTS / f"{args.name}.json"
        try:
            cells = json.loads(source.read_text())["cells"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise SystemExit(f"--figure: cannot read the cells of {source} "
                             f"({type(err).__name__}: {err}); run the benchmark first") from None
        (RESULTS / f"{args.name}.svg").write_text(figure_svg(cells))
        print(f"wrote {RESULTS / f'{args.name}.svg'}")
        return
    envs = args.envs.split(",")
    unknown = [e for e in envs if e not in GRIDS]
    if unknown:
        raise SystemExit(f"--envs: {unknown} unknown; choose from {', '.join(GRIDS)}")
    groups = per_env(args.groups, GROUPS, "--groups") if args.groups else dict(GROUPS)
    ks = (per_env(args.continuations, CONTINUATIONS, "--continuations") if args.continuations
          else dict(CONTINUATIONS))
    for flag, values, low in (("--workers", [args.workers], 1), ("--groups", groups.values(), 1),
                              ("--continuations", ks.values(), 2), ("--boots", [args.boots], 1),
                              ("--mc-groups", [args.mc_groups], 0)):
        if min(values) < low:
            raise SystemExit(f"{flag} {min(values)}: it must be at least {low}")
    cores = os.cpu_count() or 1
    if args.workers > cores:  # each plays a whole cell: more processes than cores only queue
        raise SystemExit(f"--workers {args.workers}: this machine has {cores} cores; use at most "
                         f"{cores}")
    for env in envs:  # a bad override stops here, not in every worker
        load_config(None, [f"env={env}", *args.overrides])
    options = {e: (CellOptions(groups=4, continuations=2, boots=50) if args.quick else
                   CellOptions(groups=groups[e], mc_groups=args.mc_groups,
                               continuations=ks[e], boots=args.boots)) for e in envs}
    grid = [(e, eps) for e in envs for eps in chosen_epsilons(args.eps, envs)[e]]
    # the dearest cells first (ALFWorld, then the highest ε), so the workers finish together
    cost = {e: i for i, e in enumerate(("searchqa", "tau-airline", "tau-retail", "webshop",
                                        "alfworld"))}
    jobs = sorted(((e, eps, options[e], args.overrides) for e, eps in grid),
                  key=lambda j: (cost[j[0]], j[1]), reverse=True)
    began = time.perf_counter()
    done: dict[tuple[str, float], dict] = {}
    config = {"envs": args.envs, "eps": args.eps, "groups": {e: options[e].groups for e in envs},
              "mc_groups": args.mc_groups,
              "continuations": {e: options[e].continuations for e in envs},
              "boots": args.boots if not args.quick else 50, "workers": args.workers,
              "tie_breaks": CellOptions.tie_breaks, "methods": list(METHODS),
              "readings": {r: {"settings": list(v.settings), "envs": list(v.envs),
                               "success": v.success} for r, v in READINGS.items()},
              "grids": {e: GRIDS[e] for e in envs}, "overrides": args.overrides}
    kept, runs = earlier_cells(args.into, grid) if args.into else ([], [])
    if args.into:
        config = {"runs": [*runs, config]}
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.workers) as pool:
        for cell in pool.imap_unordered(run_cell, jobs):
            done[(cell["env"], cell["epsilon"])] = cell
            wall = time.perf_counter() - began
            cells = kept + [done[k] for k in grid if k in done]
            metrics = {}
            for c in cells:
                metrics.update(cell_metrics(c))
            metrics["wall_s"] = wall
            print(f"[{len(done)}/{len(grid)} {wall:.0f} s] {cell['env']} ε={cell['epsilon']:g}: "
                  f"success {cell['success_rate']:.3f}, {cell['groups']} groups, "
                  f"{cell['steps']} steps, {cell['wall_s']:.0f} s", flush=True)
            # written after every cell, so a run cut short keeps what it measured
            path = write_result(
                args.into or args.name, config, metrics,
                {"wall_s": "<= 3600 on 2 cores", "key paired half-width": "<= 0.02"},
                "Scripted ε policies (rollout/scripted.py); truths: solver regret and Monte Carlo "
                "A^π of the same policy. key_pooled_pair_halfwidth: the widest of "
                "vict-grpo, vict-random_edges, vict/gigpo-gigpo (pooled, either truth). "
                "table12_vs_paper: VICT's Table-12 row at the cell nearest the success rate of "
                "the paper's VICT policy, beside the paper's Table 12 (paper_table12).",
                args.quick, cells=cells, cells_done=len(cells),
                cells_planned=len(kept) + len(grid),
                paper_table12=PAPER_TABLE12, table12_vs_paper=table12_vs_paper(cells))
    wall = metrics["wall_s"]
    print(format_table12_vs_paper(table12_vs_paper(cells)))
    figure = path.with_suffix(".svg")
    figure.write_text(figure_svg(cells))
    print(f"wrote {path} and {figure.name} ({wall:.0f} s)")


if __name__ == "__main__":
    multiprocessing.freeze_support()
    run_script(main)
