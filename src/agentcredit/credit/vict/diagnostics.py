"""VICT diagnostics (docs/vict.md §4.9; the VICT paper's Tables 5 and 12) and the interface audit.

``credit_diagnostics`` gives one update's flat ``vict/…`` metrics for
``metrics.jsonl``. ``interface_audit`` computes the Table-5-style audit row
(atoms per task, reconstruction %, mutation %, eligibility pass %, proof
coverage %, abstain %), with the atoms' Level-0/1/2 instrumentation mix and their
irreversibility flags (the paper's appendix C and Table 9), over any list of traces —
expert, random or policy rollouts — and ``format_audit_table`` prints rows as Markdown.

Definitions (shares in percent):
    reconstruction: rollouts with ``F(z̄) = V`` (within ``η_x``);
    mutation: mutants on which ``F`` and ``V`` agree (100 when a task has none);
    eligibility pass: non-zero ``A^VICT`` entries satisfying docs/vict.md §4.7;
    proof coverage: ``Σ p_{i,j} / (Σ 1[δ_{i,j} ≠ 0] + ε)``, ``p_{i,j} = 1`` when a
        non-zero-marginal atom has a valid proof edge;
    abstain: rollouts that abstained (``ABSTAIN_REASONS``), per reason too;
    abstain per fact (the paper's reading of Table 12): facts with ``δ̂ ≠ 0`` that would carry
        credit but get none, per reason too (``fact_abstention`` defines the facts);
    whole group tied: rollouts that abstained for ``tie`` in a group where every rollout has
        ``q_i = 0`` (its outcomes all tied), apart from a rollout that alone sits at its
        group's median;
    corrected share: ``Σ_s |λ·clip(A^VICT_s, −c, c)| / Σ_s |A^base_s|`` (0 when ``A^base``
        is 0 everywhere);
    trigger: rollouts with a non-zero correction; sparsity: steps with one;
    non-zero steps per rollout, over all rollouts and over the triggered ones;
    core size, and apart the atoms the greedy search picked and those its closure added;
    level mix: the share of atoms instrumented at Level 0, 1 and 2, each task's atoms
        counted once;
    irreversible: the share of atoms flagged irreversible; irreversibility breaks: (rollout,
        atom) pairs whose flagged atom changed status after it was SAT or VIOL, which
        should be 0.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.vict.config import VICTConfig
from agentcredit.credit.vict.correction import eligibility_failures
from agentcredit.credit.vict.method import (
    ABSTAIN_REASONS,
    OUTCOMES,
    VICT_RULE,
    RolloutCredit,
    VictComputation,
    compute_credit,
)
from agentcredit.verifier.atoms import LEVELS, Status
from agentcredit.verifier.trace import RolloutTrace

_HAS_CORE = ("credited", "zero_marginal", "no_edge", "terminal_only")
#: outcomes decided before any core existed: every atom with ``δ̂ ≠ 0`` is a fact that abstains
_BEFORE_CORE = ("non_conforming", "tie", "budget")


def interface_shares(traces: Sequence[RolloutTrace], tolerance: float) -> dict[str, float]:
    """Atoms per task, reconstruction %, mutation % and proof coverage % over ``traces``."""
    atoms_per_task = {t.task_id: len(t.atom_ids) for t in traces}
    mutants = [m for t in traces for m in t.mutations]
    marginal = proven = 0
    for trace in traces:
        with_edge = {e.atom_id for e in trace.edges if e.valid and e.weight > 0}
        for atom_id, delta in zip(trace.atom_ids, trace.delta, strict=True):
            if delta != 0.0:
                marginal += 1
                proven += atom_id in with_edge
    return {
        "atoms_per_task": sum(atoms_per_task.values()) / max(len(atoms_per_task), 1),
        "reconstruction_pct": 100.0 * sum(t.reconstruction_error <= tolerance for t in traces)
        / max(len(traces), 1),
        "mutation_pct": 100.0 * sum(m.agrees for m in mutants) / len(mutants) if mutants
        else 100.0,
        "mutants_per_rollout": len(mutants) / max(len(traces), 1),
        "proof_coverage_pct": 100.0 * proven / (marginal + 1e-6) if marginal else 0.0,
    }


def instrumentation_mix(traces: Sequence[RolloutTrace]) -> dict[str, float]:
    """The Level-0/1/2 mix and the irreversible share of the atoms of ``traces``' tasks (each
    task's atoms counted once), in percent; atoms without a level count in none of 0, 1, 2."""
    atoms = {(t.task_id, a.atom_id): a for t in traces for a in t.atoms}
    total = max(len(atoms), 1)
    out = {f"level{k}_pct": 100.0 * sum(a.level == k for a in atoms.values()) / total
           for k in LEVELS}
    out["irreversible_pct"] = 100.0 * sum(a.irreversible for a in atoms.values()) / total
    return out


def irreversibility_breaks(trace: RolloutTrace) -> tuple[str, ...]:
    """The atoms flagged irreversible whose status changed after it first became SAT or VIOL
    in ``trace`` (the flag's promise, ``Atom.irreversible``, checked on a real rollout)."""
    broken = []
    for j, atom in enumerate(trace.atoms):
        if not atom.irreversible:
            continue
        column = [row[j] for row in trace.statuses]
        settled = next((t for t, z in enumerate(column) if z in (Status.SAT, Status.VIOL)), None)
        if settled is not None and any(z is not column[settled] for z in column[settled:]):
            broken.append(atom.atom_id)
    return tuple(broken)


def whole_group_ties(rollouts: Sequence[RolloutCredit]) -> list[bool]:
    """``[B]``: the rollout abstained for ``tie`` in a group where every rollout has ``q_i = 0``
    (the group's outcomes all tied), as opposed to a rollout alone at its group's median."""
    all_tied: dict[int, bool] = {}
    for r in rollouts:
        all_tied[r.group] = all_tied.get(r.group, True) and r.direction == 0
    return [r.outcome == "tie" and all_tied[r.group] for r in rollouts]


def fact_abstention(rollouts: Sequence[RolloutCredit],
                    group_tie: Sequence[bool]) -> tuple[int, Counter]:
    """The facts that would carry credit, and those that abstain by reason (docs/vict.md §4.9).

    A *fact* is a (rollout ``i``, atom ``j``) pair with ``δ̂_{i,j} ≠ 0`` that VICT would
    credit if it could: ``j ∈ C*_i`` for a rollout whose core search returned a core, and
    every atom with ``δ̂ ≠ 0`` for a rollout that abstained before a core existed
    (``non_conforming``, ``budget``, a lone ``tie``). The rollouts of a whole-group tie
    (``group_tie [B]``, from ``whole_group_ties``) are left out: they are reported apart, as
    a share of rollouts. A fact abstains with its rollout's reason when the rollout abstained
    before a core, with ``no_edge`` or ``terminal_only`` when its core atom has no witness
    (``RolloutCredit.unproven``).

    Returns ``(facts, abstained)``: the number of facts and a ``Counter`` reason → abstained
    facts (reasons from ``ABSTAIN_REASONS``; its total ≤ ``facts``).
    """
    facts, abstained = 0, Counter()
    for r, tied in zip(rollouts, group_tie, strict=True):
        if tied:
            continue
        if r.outcome in _BEFORE_CORE:
            count = sum(v != 0.0 for v in r.delta_hat.values())
            facts += count
            abstained[r.outcome] += count
        else:
            facts += sum(r.delta_hat[a] != 0.0 for a in r.core)
            abstained.update(reason for _, reason in r.unproven)
    return facts, abstained


def credit_diagnostics(batch: CreditBatch, computation: VictComputation) -> dict[str, float]:
    """docs/vict.md §4.9's per-update diagnostics as a flat ``vict/…`` float dict."""
    traces = batch.traces
    num_rollouts = batch.num_rollouts
    shares = interface_shares(traces, computation.config.conformance_tolerance)
    outcomes = Counter(r.outcome for r in computation.rollouts)
    nonzero = computation.correction != 0  # [S]
    per_rollout = torch.zeros(num_rollouts, dtype=torch.long, device=nonzero.device)
    per_rollout.index_add_(0, batch.step_rollout, nonzero.long())  # [B]
    with_core = [r for r in computation.rollouts if r.outcome in _HAS_CORE]
    cores = [len(r.core) for r in with_core]
    picked = [len(r.picked) for r in with_core]
    searched = sum(r.outcome in _HAS_CORE + ("budget", "empty_core")
                   for r in computation.rollouts)
    groups = {}
    for i, g in enumerate(batch.group_index.tolist()):
        groups[g] = computation.conforming[i]
    group_tie = whole_group_ties(computation.rollouts)
    facts, fact_abstained = fact_abstention(computation.rollouts, group_tie)
    triggered = per_rollout[per_rollout > 0]  # [B'] corrected steps of the triggered rollouts
    base_mass = float(computation.base.double().abs().sum())
    checked, failures = computation.eligibility_checked, 0
    if not computation.rule.eligibility:
        checked, failed = eligibility_failures(
            computation.vict, batch.step_rollout.tolist(), batch.step_index.tolist(), traces,
            computation.conforming, [r.core for r in computation.rollouts],
            [r.delta_hat for r in computation.rollouts])
        failures = len(failed)
    out = {f"vict/{k}": v for k, v in shares.items()}
    out.update({
        "vict/conforming_task_pct": 100.0 * sum(groups.values()) / len(groups),
        "vict/eligibility_pass_pct": 100.0 * (checked - failures) / checked if checked else 100.0,
        "vict/eligibility_checked": float(checked),
        "vict/abstain_pct": 100.0 * sum(outcomes[r] for r in ABSTAIN_REASONS) / num_rollouts,
        "vict/abstain_tie_group_pct": 100.0 * sum(group_tie) / num_rollouts,
        "vict/abstain_fact_pct": 100.0 * sum(fact_abstained.values()) / facts if facts else 0.0,
        "vict/trigger_pct": 100.0 * float((per_rollout > 0).double().mean()),
        "vict/sparsity_pct": 100.0 * float(nonzero.double().mean()),
        "vict/nonzero_steps_per_rollout": float(per_rollout.double().mean()),
        "vict/nonzero_steps_per_triggered": (float(triggered.double().mean())
                                             if triggered.numel() else 0.0),
        "vict/core_size_mean": sum(cores) / len(cores) if cores else 0.0,
        "vict/core_picked_mean": sum(picked) / len(picked) if picked else 0.0,
        "vict/core_closure_mean": ((sum(cores) - sum(picked)) / len(cores)) if cores else 0.0,
        "vict/core_size_std": _std(cores),
        "vict/budget_hit_pct": 100.0 * outcomes["budget"] / searched if searched else 0.0,
        "vict/lambda": computation.lam,
        # 1 per update whose λ is 0; summed over a run's updates it counts those batches
        "vict/lambda_zero_batches": float(computation.lam == 0.0),
        # λ = 0 although some A^VICT ≠ 0: VICT silently switched off (should stay 0)
        "vict/lambda_collapsed_batches": float(computation.lam == 0.0
                                               and bool(computation.vict.any())),
        "vict/clip_c": computation.clip,
        "vict/mean_abs_correction": float(computation.correction.double().abs().mean()),
        "vict/corrected_share": (float(computation.correction.double().abs().sum()) / base_mass
                                 if base_mass else 0.0),
        "vict/credit_ms": computation.wall_ms,
    })
    for outcome in OUTCOMES:
        key = "abstain" if outcome in ABSTAIN_REASONS else "outcome"
        out[f"vict/{key}/{outcome}_pct"] = 100.0 * outcomes[outcome] / num_rollouts
    for reason in ABSTAIN_REASONS:
        out[f"vict/abstain_fact/{reason}_pct"] = (100.0 * fact_abstained[reason] / facts
                                                  if facts else 0.0)
    return out


def _std(values: Sequence[float]) -> float:
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


# INTERFACE AUDIT

@dataclass(frozen=True)
class AuditRow:
    """One row of the interface audit (the VICT paper's Table 5, plus context).

    Attributes:
        rollouts, tasks: what was audited.
        atoms_per_task: mean number of atoms per task.
        reconstruction_pct, mutation_pct: conformance of ``F`` with ``V``.
        eligibility_pass_pct: non-zero corrections satisfying docs/vict.md §4.7 (must be 100).
        proof_coverage_pct: non-zero-marginal atoms with a valid proof edge.
        abstain_pct: rollouts that abstained; ``abstain_by_reason`` ranks the reasons.
        trigger_pct: rollouts with a non-zero correction.
        abstain_fact_pct: facts (``fact_abstention``) that abstained, the paper's per-fact
            reading; ``abstain_fact_by_reason`` ranks the reasons.
        tie_group_pct: rollouts of whole-group ties (left out of the per-fact figure).
        level_pct: the share of atoms at instrumentation Level 0, 1 and 2 (``Atom.level``).
        irreversible_pct: the share of atoms flagged irreversible (``Atom.irreversible``).
        irreversible_breaks: (rollout, atom) pairs contradicting the flag (should be 0).
    """

    rollouts: int
    tasks: int
    atoms_per_task: float
    reconstruction_pct: float
    mutation_pct: float
    eligibility_pass_pct: float
    proof_coverage_pct: float
    abstain_pct: float
    trigger_pct: float
    abstain_by_reason: tuple[tuple[str, float], ...]
    abstain_fact_pct: float = 0.0
    abstain_fact_by_reason: tuple[tuple[str, float], ...] = ()
    tie_group_pct: float = 0.0
    level_pct: tuple[float, float, float] = (0.0, 0.0, 0.0)
    irreversible_pct: float = 0.0
    irreversible_breaks: int = 0

    @property
    def top_abstention_reason(self) -> str:
        """The most frequent abstention reason (``"-"`` when none abstained)."""
        return self.abstain_by_reason[0][0] if self.abstain_by_reason else "-"

    @property
    def top_fact_reason(self) -> str:
        """The most frequent reason a fact abstained (``"-"`` when none did)."""
        return self.abstain_fact_by_reason[0][0] if self.abstain_fact_by_reason else "-"


def ranked_reasons(diagnostics: Mapping[str, float], prefix: str) -> tuple[tuple[str, float], ...]:
    """``(reason, share)`` for each of ``ABSTAIN_REASONS`` with a positive ``<prefix>/<reason>_pct``
    in ``diagnostics``, largest first (ties in ``ABSTAIN_REASONS`` order)."""
    shares = [(r, diagnostics[f"{prefix}/{r}_pct"]) for r in ABSTAIN_REASONS]
    return tuple(sorted(((r, v) for r, v in shares if v > 0), key=lambda x: -x[1]))


def interface_audit(traces: Sequence[RolloutTrace], group_ids: Sequence[int] | None = None,
                    config: VICTConfig | None = None) -> AuditRow:
    """Audit the verifier interface on ``traces`` (for ``agentcredit audit``).

    The rollouts of one task form a group (``group_ids`` overrides that); each
    rollout's reward is its verifier score ``V`` at its last step, and VICT runs
    with ``config`` (defaults) to measure eligibility, coverage and abstention.
    """
    traces = list(traces)
    if not traces:
        raise ValueError("interface_audit needs at least one trace")
    empty = [i for i, t in enumerate(traces) if t.num_steps == 0]
    if empty:
        raise ValueError(f"traces {empty[:5]} have no steps; audit rollouts with at least one")
    if group_ids is None:
        first: dict[str, int] = {}
        group_ids = [first.setdefault(t.task_id, len(first)) for t in traces]
    config = config or VICTConfig()
    rewards = [[0.0] * (t.num_steps - 1) + [t.v_score] for t in traces]
    batch = CreditBatch.from_lists(rewards, list(group_ids), traces=traces,
                                   dtype=torch.float64)
    computation = compute_credit(batch, config, replace(VICT_RULE, eligibility=False))
    diagnostics = credit_diagnostics(batch, computation)
    mix = instrumentation_mix(traces)
    return AuditRow(
        rollouts=len(traces), tasks=len({t.task_id for t in traces}),
        atoms_per_task=diagnostics["vict/atoms_per_task"],
        reconstruction_pct=diagnostics["vict/reconstruction_pct"],
        mutation_pct=diagnostics["vict/mutation_pct"],
        eligibility_pass_pct=diagnostics["vict/eligibility_pass_pct"],
        proof_coverage_pct=diagnostics["vict/proof_coverage_pct"],
        abstain_pct=diagnostics["vict/abstain_pct"], trigger_pct=diagnostics["vict/trigger_pct"],
        abstain_by_reason=ranked_reasons(diagnostics, "vict/abstain"),
        abstain_fact_pct=diagnostics["vict/abstain_fact_pct"],
        abstain_fact_by_reason=ranked_reasons(diagnostics, "vict/abstain_fact"),
        tie_group_pct=diagnostics["vict/abstain_tie_group_pct"],
        level_pct=tuple(mix[f"level{k}_pct"] for k in LEVELS),
        irreversible_pct=mix["irreversible_pct"],
        irreversible_breaks=sum(len(irreversibility_breaks(t)) for t in traces))


def format_audit_table(rows: Mapping[str, AuditRow]) -> str:
    """Markdown table of audit rows keyed by their label (``expert``, ``random``, ``policy``)."""
    head = ("| rollouts | n | atoms/task | recon. % | mutation % | elig. pass % | proof cov. % "
            "| abstain % | top abstention reason | fact abstain % | top fact reason "
            "| whole-group tie % | L0 % | L1 % | L2 % | irrev. % | irrev. breaks |")
    lines = [head, "|" + " --- |" * 17]
    for label, row in rows.items():
        lines.append(f"| {label} | {row.rollouts} | {row.atoms_per_task:.1f} | "
                     f"{row.reconstruction_pct:.1f} | {row.mutation_pct:.1f} | "
                     f"{row.eligibility_pass_pct:.1f} | {row.proof_coverage_pct:.1f} | "
                     f"{row.abstain_pct:.1f} | {row.top_abstention_reason} | "
                     f"{row.abstain_fact_pct:.1f} | {row.top_fact_reason} | "
                     f"{row.tie_group_pct:.1f} | "
                     + " | ".join(f"{p:.1f}" for p in row.level_pct)
                     + f" | {row.irreversible_pct:.1f} | {row.irreversible_breaks} |")
    return "\n".join(lines)
