"""VICT's ablations and negative controls (docs/vict.md §4.8): same atoms, another credit rule.

Estimators and their rules:

- ``dense_atom_reward``: no core/edges: ``+w_j`` at the step where atom ``j`` turns
  SAT, ``−w_j`` where it turns VIOL, added to the step rewards, then the backbone.
- ``commit_only``: each core atom's ``δ̂`` goes only to its commit steps.
- ``temporal_nearest``: each core atom's ``δ̂`` goes to the nearest step before the end
  whose action text or state diff mentions one of its variables.
- ``random_edges``: VICT's credited steps moved by a seeded random permutation of each
  rollout's steps (same number of credited steps, same totals).
- ``no_core``: every atom with ``δ̂ ≠ 0`` is credited over its proof edges, no greedy core.
- ``no_proof_edges``: each core atom's ``δ̂`` spread equally over all steps of the rollout.

All but ``dense_atom_reward`` run ``method.compute_credit`` with their
``CreditRule``: the backbone, conformance gate, marginals, cores (except
``no_core``), ``λ`` and ``c`` are VICT's; only the steps that receive each
atom's ``δ̂`` change. Conformance still gates every control (a non-conforming
task's atoms are not trusted by any rule). The eligibility invariant is not
enforced for the controls — they break it by design — but its pass rate is
reported in their diagnostics.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.registry import register_estimator
from agentcredit.credit.result import CreditResult
from agentcredit.credit.vict.config import VICTConfig
from agentcredit.credit.vict.edges import Witness, proof_witnesses
from agentcredit.credit.vict.estimator import credit_result
from agentcredit.credit.vict.method import (
    CreditRule,
    backbone_advantages,
    compute_credit,
    require_traces,
)
from agentcredit.verifier.atoms import Status
from agentcredit.verifier.trace import RolloutTrace

ABLATIONS = ("dense_atom_reward", "commit_only", "temporal_nearest", "random_edges", "no_core",
             "no_proof_edges")


# WITNESS RULES OF THE CONTROLS

def commit_witnesses(trace: RolloutTrace) -> dict[str, list[Witness]]:
    """``commit_only``: every commit step of an atom, weight 1 (no proof-record check)."""
    out: dict[str, list[Witness]] = {}
    for edge in trace.edges:
        if edge.relation == "commit":
            out.setdefault(edge.atom_id, []).append(
                Witness(edge.step, 1.0, ("commit",), (edge.source,)))
    return out


def nearest_witnesses(trace: RolloutTrace) -> dict[str, list[Witness]]:
    """``temporal_nearest``: the last step whose action or state diff mentions the atom."""
    out: dict[str, list[Witness]] = {}
    for atom_id in trace.atom_ids:
        for t in range(trace.num_steps - 1, -1, -1):
            if atom_id in trace.mentions[t]:
                out[atom_id] = [Witness(t, 1.0, ("nearest",), (f"mention:{trace.actions[t]}",))]
                break
    return out


def spread_witnesses(trace: RolloutTrace) -> dict[str, list[Witness]]:
    """``no_proof_edges``: every step of the rollout, weight 1."""
    every = [Witness(t, 1.0, ("spread",), ("every step",)) for t in range(trace.num_steps)]
    return {atom_id: every for atom_id in trace.atom_ids}


RULES = {
    "commit_only": CreditRule("commit_only", commit_witnesses),
    "temporal_nearest": CreditRule("temporal_nearest", nearest_witnesses),
    "random_edges": CreditRule("random_edges", proof_witnesses, permute=True),
    "no_core": CreditRule("no_core", proof_witnesses, use_core=False),
    "no_proof_edges": CreditRule("no_proof_edges", spread_witnesses),
}


def _register(name: str) -> None:
    rule = RULES[name]

    def estimator(batch: CreditBatch, config: VICTConfig) -> CreditResult:
        return credit_result(batch, compute_credit(batch, config, rule))

    estimator.__name__ = name
    estimator.__doc__ = (f"VICT control ``{name}`` (docs/vict.md §4.8): VICT with the credit rule "
                         f"``{rule.witnesses.__name__}``; same output fields as ``vict``.")
    register_estimator(name, VICTConfig, needs=("traces",))(estimator)


for _name in RULES:
    _register(_name)


# DENSE ATOM REWARD

def atom_rewards(batch: CreditBatch, config: VICTConfig) -> tuple[torch.Tensor, list[dict]]:
    """Per-step atom rewards ``[S]`` of ``dense_atom_reward`` and one event per non-zero term.

    ``+w_j`` at the step where atom ``j`` turns SAT, ``−w_j`` where it turns
    VIOL; zero on non-conforming tasks.
    """
    traces = require_traces(batch, "dense_atom_reward")
    groups = batch.group_index.tolist()
    worst: dict[int, float] = {}
    for g, trace in zip(groups, traces, strict=True):
        worst[g] = max(worst.get(g, 0.0), trace.conformance_error)
    rewards, events, offset = [], [], 0
    for i, trace in enumerate(traces):
        conforming = worst[groups[i]] <= config.conformance_tolerance
        weights = [a.weight for a in trace.atoms]
        for t in range(trace.num_steps):
            before, after = trace.statuses[t], trace.statuses[t + 1]
            total = 0.0
            for j, atom_id in enumerate(trace.atom_ids):
                if not conforming:
                    break
                if after[j] is Status.SAT and before[j] is not Status.SAT:
                    term, turned = weights[j], "sat"
                elif after[j] is Status.VIOL and before[j] is not Status.VIOL:
                    term, turned = -weights[j], "viol"
                else:
                    continue
                total += term
                events.append({"rollout": i, "step": t, "flat_step": offset + t,
                               "atom_id": atom_id, "reward": term, "turned": turned})
            rewards.append(total)
        offset += trace.num_steps
    return torch.tensor(rewards, dtype=batch.step_rewards.dtype,
                        device=batch.step_rewards.device), events


@register_estimator("dense_atom_reward", VICTConfig, needs=("traces",))
def dense_atom_reward(batch: CreditBatch, config: VICTConfig) -> CreditResult:
    """VICT control ``dense_atom_reward`` (docs/vict.md §4.8): atom rewards added to the step
    rewards, then the backbone; no core, no edges.

    Returns the backbone's advantages on the shaped rewards; ``extras``:
    ``base_advantage`` (backbone on the original rewards), ``atom_reward`` and
    ``correction`` (shaped − original), all ``[S]``; one ledger row per atom event.
    """
    started = time.perf_counter()
    extra, events = atom_rewards(batch, config)  # [S]
    shaped = replace(batch, step_rewards=batch.step_rewards + extra)
    elapsed = time.perf_counter() - started
    result, _ = backbone_advantages(shaped, config)
    original, _ = backbone_advantages(batch, config)
    correction = result.step_advantages - original.step_advantages  # [S]
    traces, group_ids = batch.traces, batch.group_ids.tolist()
    corr = correction.tolist()
    rows = [{"method": "dense_atom_reward", "task_id": traces[e["rollout"]].task_id,
             "group_id": group_ids[e["rollout"]], "rollout": e["rollout"], "step": e["step"],
             "action": traces[e["rollout"]].actions[e["step"]], "atom_id": e["atom_id"],
             "relation": "dense", "evidence_source": f"status:{e['atom_id']}={e['turned']}",
             "atom_credit": e["reward"], "correction": corr[e["flat_step"]],
             "base_advantage": float(original.step_advantages[e["flat_step"]])}
            for e in events]
    nonzero = extra != 0
    per_rollout = torch.zeros(batch.num_rollouts, dtype=torch.long, device=nonzero.device)
    per_rollout.index_add_(0, batch.step_rollout, nonzero.long())  # [B]
    diagnostics = {
        "vict/sparsity_pct": 100.0 * float(nonzero.double().mean()),
        "vict/trigger_pct": 100.0 * float((per_rollout > 0).double().mean()),
        "vict/mean_atom_reward": float(extra.double().mean()),
        "vict/credit_ms": 1000.0 * elapsed,
    }
    diagnostics.update({f"base/{k}": v for k, v in result.diagnostics.items()})
    extras = dict(result.extras)
    extras.update({"base_advantage": original.step_advantages, "atom_reward": extra,
                   "correction": correction})
    return CreditResult(step_advantages=result.step_advantages, diagnostics=diagnostics,
                        extras=extras, ledger_rows=rows)
