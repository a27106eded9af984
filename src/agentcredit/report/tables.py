"""The report's tables: the runs, success per method and task type, the VICT audit, the credit
check, where the ledger's credit went, and the timing of an update.

Each builder returns ``Table`` records of plain cells (text, numbers, ``None`` for
"not logged"); ``page.py`` escapes and renders them. Numbers over seeds are
``aggregate.Summary`` cells shown as ``mean ± sd``. Everything is read from what the
runs logged (``metrics.jsonl``, ``ledger.jsonl``): nothing is recomputed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentcredit.report.aggregate import (
    Summary,
    auc_pct,
    by_method,
    curve,
    evals,
    final,
    mean_over_updates,
    number,
    over_seeds,
    seed_curve,
    updates,
)
from agentcredit.report.run_files import RunData

Cell = str | int | float | Summary | None

#: the VICT audit's columns: ``credit/vict/…`` key → header (docs/vict.md §4.9; abstention of
#: rollouts by reason with the whole-group ties apart, abstention per fact, the paper's Table 12
#: beside its Table 5); the table adds the top reason a fact abstained
VICT_AUDIT = (
    ("atoms_per_task", "atoms / task"), ("reconstruction_pct", "reconstr. %"),
    ("mutation_pct", "mutation %"), ("conforming_task_pct", "conforming %"),
    ("eligibility_pass_pct", "eligibility %"), ("proof_coverage_pct", "proof cov. %"),
    ("abstain_pct", "abstain %"), ("abstain/tie_pct", "tie %"),
    ("abstain_tie_group_pct", "whole group tied %"), ("abstain/non_conforming_pct", "non-conf. %"),
    ("abstain/budget_pct", "budget %"), ("abstain/no_edge_pct", "no edge %"),
    ("abstain/terminal_only_pct", "terminal-only %"), ("abstain_fact_pct", "fact abstain %"),
    ("trigger_pct", "trigger %"), ("sparsity_pct", "sparsity %"),
    ("nonzero_steps_per_rollout", "actions / rollout"),
    ("nonzero_steps_per_triggered", "actions / triggered"), ("core_size_mean", "core size"),
    ("core_picked_mean", "core picked"), ("core_closure_mean", "core closure"),
    ("budget_hit_pct", "budget hit %"), ("lambda", "λ"),
    ("corrected_share", "corrected share"), ("mean_abs_correction", "mean |corr.|"),
    ("credit_ms", "credit ms"),
)
#: the credit check's columns: ``credit_check/solver/…`` key → header (docs/credit_check.md §3;
#: ``pooled_random`` is the chance row's pooled ρ)
CREDIT_CHECK = (
    ("pooled", "pooled ρ"), ("pooled_signal", "pooled ρ (signal)"), ("within", "within ρ"),
    ("sign", "sign"), ("sign_balanced", "sign (balanced)"), ("pooled_random", "random pooled ρ"),
)
#: update phases in the order an update runs them (``time/…`` of ``train/update.py``); any other
#: phase a run logs follows them
PHASES = ("rollout", "score", "teacher", "trace", "credit", "save_rollouts", "update")
_FACT_REASON = re.compile(r"^credit/vict/abstain_fact/(?P<reason>.+)_pct$")
_SPLIT_TYPE = re.compile(r"^eval/(?P<split>[^/]+)/success(?:/(?P<type>[^/]+))?$")


@dataclass
class Table:
    """One table of the page.

    Attributes:
        key: a stable id (``success-final``), the HTML id of the table.
        title: its heading.
        header: column names.
        rows: one list of cells per row.
        note: one or two sentences under the table (how to read it).
    """

    key: str
    title: str
    header: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    note: str = ""


def runs_table(runs: Sequence[RunData]) -> Table:
    """One row per run: method, seed, estimator, progress, last success, saved updates."""
    table = Table("runs", "Runs", ["run", "method", "seed", "estimator", "status",
                                   "last validation success", "saved updates", "problems"],
                  note="A run still training is shown as far as it has got.")
    for run in runs:
        saved = [u for u, _ in run.saved]
        table.rows.append([run.name, run.method, run.seed, run.estimator or None, run.status,
                           final(run, evals, "eval/success"),
                           _ranges(saved) if saved else None, len(run.problems) or None])
    return table


def success_tables(runs: Sequence[RunData]) -> list[Table]:
    """Final validation success over seeds, overall and per split, then per split and task
    type the final success and the area under its curve (the papers' tables); methods
    without an evaluation are left out."""
    groups = {m: members for m, members in by_method(runs).items()
              if any(run.evals for run in members)}
    splits: dict[str, list[str]] = {}
    for run in runs:
        for record in run.evals:
            for key in record:
                match = _SPLIT_TYPE.match(key)
                if match:
                    types = splits.setdefault(match["split"], [])
                    if match["type"] and match["type"] not in types:
                        types.append(match["type"])
    if not splits:
        return []
    overall = Table("success-final", "Final validation success",
                    ["method", "seeds", "all", *splits],
                    note="The last evaluation of each seed (a run in progress: its latest), "
                         "mean ± sd over seeds.")
    for method, members in groups.items():
        keys = ["eval/success", *(f"eval/{s}/success" for s in splits)]
        overall.rows.append([method, len(members),
                             *(over_seeds(members, lambda r, k=k: final(r, evals, k))
                               for k in keys)])
    tables = [overall]
    for split, types in splits.items():
        columns = [("all", f"eval/{split}/success"),
                   *((t, f"eval/{split}/success/{t}") for t in sorted(types))]
        by_type = Table(f"success-{split}", f"Final success per task type: {split}",
                        ["method", *(c for c, _ in columns)],
                        note="Mean ± sd over seeds of each seed's last evaluation.")
        auc = Table(f"auc-{split}", f"Area under the success curve per task type: {split}",
                    ["method", *(c for c, _ in columns)],
                    note="Trapezoids over the logged evaluations, as a % of the box from the "
                         "first evaluation to the last; mean ± sd over seeds. A run started "
                         "with run.eval_at_start=false begins at its first evaluation.")
        for method, members in groups.items():
            by_type.rows.append([method, *(over_seeds(members, lambda r, k=k: final(r, evals, k))
                                           for _, k in columns)])
            auc.rows.append([method, *(over_seeds(members,
                                                  lambda r, k=k: auc_pct(curve(r, evals, k)))
                                       for _, k in columns)])
        tables += [by_type, auc]
    return tables


def vict_audit_table(runs: Sequence[RunData]) -> Table | None:
    """The VICT diagnostics of every method that logged them, mean over updates and seeds."""
    table = Table("vict-audit", "VICT audit (docs/vict.md §4.9)",
                  ["method", "seeds", *(h for _, h in VICT_AUDIT), "λ = 0 batches",
                   "top fact reason"],
                  note="Each figure is averaged over a run's updates, then mean ± sd over "
                       "seeds; λ = 0 batches is the count per run. Eligibility must be 100. "
                       "Abstention % counts rollouts; fact abstain % counts the (rollout, atom) "
                       "facts VICT would credit, whole-group ties left out (the paper's "
                       "reading); top fact reason is the largest of its per-reason shares.")
    for method, members in by_method(runs).items():
        if not any(number(r, "credit/vict/atoms_per_task") is not None
                   for run in members for r in run.updates):
            continue
        table.rows.append([method, len(members),
                           *(over_seeds(members, lambda r, k=k: mean_over_updates(
                               r, f"credit/vict/{k}")) for k, _ in VICT_AUDIT),
                           over_seeds(members, _lambda_zero_batches),
                           _top_fact_reason(members)])
    return table if table.rows else None


def _top_fact_reason(members: Sequence[RunData]) -> str | None:
    """The reason with the largest share of abstaining facts (mean over updates, then seeds),
    from the ``credit/vict/abstain_fact/<reason>_pct`` the runs logged; ``None`` when no fact
    abstained."""
    reasons = sorted({m["reason"] for run in members for record in run.updates
                      for key in record if (m := _FACT_REASON.match(key))})
    shares = [(summary.mean, reason) for reason in reasons
              if (summary := over_seeds(members, lambda run, r=reason: mean_over_updates(
                  run, f"credit/vict/abstain_fact/{r}_pct"))) is not None and summary.mean > 0]
    return max(shares)[1] if shares else None


def credit_check_table(runs: Sequence[RunData]) -> Table | None:
    """Per method and checked update (``run.credit_check_every``), the credit against the
    solver truth, mean ± sd over seeds, with the random row's pooled ρ beside it."""
    table = Table("credit-check", "Credit check: credit against the solver truth "
                  "(docs/credit_check.md)",
                  ["method", "update", "seeds", *(h for _, h in CREDIT_CHECK),
                   "truth s / 100 steps"],
                  note="Spearman ρ between the estimator's step credit and the solver's regret "
                       "g_t on the update's own batch: pooled over all steps, over the groups "
                       "whose outcomes differ (signal), and within each rollout; sign: the "
                       "share of clearly non-zero g_t whose sign the credit matches. A method "
                       "constant within a rollout (GRPO, RLOO) scores 0 within by "
                       "construction. The random row is what chance gives.")
    keys = [f"credit_check/solver/{k}" for k, _ in CREDIT_CHECK]
    keys.append("credit_check/solver_s_per_100_steps")
    for method, members in by_method(runs).items():
        columns = [dict(seed_curve(members, updates, key)) for key in keys]
        for update in sorted({u for column in columns for u in column}):
            seeds = max(column[update].n for column in columns if update in column)
            table.rows.append([method, update, seeds, *(c.get(update) for c in columns)])
    return table if table.rows else None


def ledger_table(runs: Sequence[RunData], top: int = 12) -> Table | None:
    """Per method, the atoms that received the most credit in ``ledger.jsonl``."""
    table = Table("ledger", "Where the credit went (ledger.jsonl)",
                  ["method", "atom", "rows", "Σ atom credit", "mean |atom credit|",
                   "positive %", "relations"],
                  note=f"The {top} atoms of each method with the largest total |atom credit| "
                       "over all updates and seeds (docs/vict.md §4.7).")
    for method, members in by_method(runs).items():
        totals: dict[str, list[float]] = defaultdict(list)
        relations: dict[str, set[str]] = defaultdict(set)
        for run in members:
            for row in run.ledger:
                amount = number(row, "atom_credit")
                if amount is None or not isinstance(row.get("atom_id"), str):
                    continue
                totals[row["atom_id"]].append(amount)
                relations[row["atom_id"]].update(str(row.get("relation", "")).split("+"))
        ranked = sorted(totals, key=lambda a: -sum(abs(x) for x in totals[a]))[:top]
        for atom in ranked:
            amounts = totals[atom]
            table.rows.append([method, atom, len(amounts), sum(amounts),
                               sum(abs(x) for x in amounts) / len(amounts),
                               100.0 * sum(x > 0 for x in amounts) / len(amounts),
                               ", ".join(sorted(r for r in relations[atom] if r))])
    return table if table.rows else None


def timing_table(runs: Sequence[RunData]) -> Table | None:
    """Seconds per update in each phase, mean over updates and seeds, and the evaluation."""
    logged = {k.removeprefix("time/") for run in runs for r in run.updates for k in r
              if k.startswith("time/")}
    if not logged:
        return None
    phases = [p for p in PHASES if p in logged] + sorted(logged - set(PHASES))
    table = Table("timing", "Timing of an update (seconds)",
                  ["method", *phases, "total", "eval (per evaluation)"],
                  note="Wall seconds per update in each phase of train/update.py, mean over "
                       "updates, then mean ± sd over seeds; a phase a method does not run "
                       "is empty.")
    for method, members in by_method(runs).items():
        if not any(run.updates for run in members):
            continue
        cells: list[Cell] = [over_seeds(members, lambda r, p=p: mean_over_updates(r, f"time/{p}"))
                             for p in phases]
        total = over_seeds(members, lambda r: _mean_total(r, phases))
        evaluation = over_seeds(members, _mean_eval_time)
        table.rows.append([method, *cells, total, evaluation])
    return table


def _lambda_zero_batches(run: RunData) -> float | None:
    values = [v for r in run.updates if (v := number(r, "credit/vict/lambda_zero_batches"))
              is not None]
    return float(sum(values)) if values else None


def _mean_total(run: RunData, phases: Sequence[str]) -> float | None:
    totals = [sum(number(r, f"time/{p}") or 0.0 for p in phases) for r in run.updates]
    return sum(totals) / len(totals) if totals else None


def _mean_eval_time(run: RunData) -> float | None:
    values = [v for r in run.evals if (v := number(r, "time/eval")) is not None]
    return sum(values) / len(values) if values else None


def _ranges(numbers: list[int]) -> str:
    """``1-3, 5, 10``."""
    parts: list[Any] = []
    for n in numbers:
        if parts and isinstance(parts[-1], list) and parts[-1][1] == n - 1:
            parts[-1][1] = n
        else:
            parts.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)
