"""VICT's ablations and negative controls (docs/vict.md §4.8): same atoms, another credit rule.

Estimators and their rules:

- ``dense_atom_reward``: no core/edges: ``+w_j`` at the first step where atom ``j`` turns
  SAT, ``−w_j`` at the first where it turns VIOL, added to the step rewards; a step's
  advantage is its return-to-go normalised over the group's steps.
- ``commit_only``: each core atom's ``δ̂`` goes only to its commit steps.
- ``temporal_nearest``: each core atom's ``δ̂`` goes to one step: the nearest one at or
  before the step that last changed the atom's status whose action text or state diff
  mentions one of its variables.
- ``random_edges``: VICT's credited steps shuffled among the steps of the whole group,
  each rollout keeping its number of credited steps; a fresh draw every update.
- ``no_core``: every atom with ``δ̂ ≠ 0`` is credited over its proof edges, no greedy core;
  tied rollouts (``q_i = 0``) still abstain.
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
from agentcredit.credit.gigpo import discounted_return_to_go
from agentcredit.credit.grpo import group_relative
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
    """``temporal_nearest``: the nearest step at or before the atom's settling step that
    mentions it.

    The settling step is the last step that changed the atom's status (where the verifier
    last "fired" on it); an atom whose status never changed settles at the end. The
    credited step is the closest one at or before it whose action text or state diff
    mentions one of the atom's variables (``trace.mentions``), with no proof-record check.
    """
    out: dict[str, list[Witness]] = {}
    for j, atom_id in enumerate(trace.atom_ids):
        changed = [t for t in range(trace.num_steps)
                   if trace.statuses[t + 1][j] is not trace.statuses[t][j]]
        settle = changed[-1] if changed else trace.num_steps - 1
        for t in range(settle, -1, -1):
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
    # random_edges draws its shuffle in batch order, so reordering the rollouts changes it
    order = () if rule.permute else ("permutation",)
    # its random credit can outweigh a return's edge between two rollouts of the same steps
    waives = {"sign": "a control whose shuffled edges give two rollouts of the same steps "
                      "different random credit"} if rule.permute else {}
    register_estimator(name, VICTConfig, needs=("traces",),
                       claims=("step_credit", "constant_group_zero", *order),
                       waives=waives)(estimator)


for _name in RULES:
    _register(_name)


# DENSE ATOM REWARD

def atom_rewards(batch: CreditBatch, config: VICTConfig) -> tuple[torch.Tensor, list[dict]]:
    """Per-step atom rewards ``[S]`` of ``dense_atom_reward`` and one event per non-zero term.

    ``+w_j`` at the first step where atom ``j`` turns SAT in the rollout, ``−w_j`` at
    the first step where it turns VIOL; each atom is paid at most once per kind, so an
    atom that flips back and forth earns nothing more. Zero on non-conforming tasks.
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
        paid: set[tuple[int, Status]] = set()  # (atom, SAT or VIOL) already rewarded
        for t in range(trace.num_steps):
            before, after = trace.statuses[t], trace.statuses[t + 1]
            total = 0.0
            for j, atom_id in enumerate(trace.atom_ids):
                if not conforming:
                    break
                turned = after[j] if after[j] is not before[j] else None
                if turned not in (Status.SAT, Status.VIOL) or (j, turned) in paid:
                    continue
                paid.add((j, turned))
                term = weights[j] if turned is Status.SAT else -weights[j]
                total += term
                events.append({"rollout": i, "step": t, "flat_step": offset + t,
                               "atom_id": atom_id, "reward": term,
                               "turned": "sat" if turned is Status.SAT else "viol"})
            rewards.append(total)
        offset += trace.num_steps
    return torch.tensor(rewards, dtype=batch.step_rewards.dtype,
                        device=batch.step_rewards.device), events


@register_estimator("dense_atom_reward", VICTConfig, needs=("traces",), claims=("permutation",))
def dense_atom_reward(batch: CreditBatch, config: VICTConfig) -> CreditResult:
    """VICT control ``dense_atom_reward`` (docs/vict.md §4.8): shaped per-step rewards, no core,
    no edges.

    ``r'_{i,t} = r_{i,t} + Σ_j ±w_j`` (``atom_rewards``); a step's advantage is its
    undiscounted return-to-go ``G'_{i,t} = Σ_{k≥t} r'_{i,k}`` normalised over every step
    of its group, ``(G' − μ_g) / (σ_g + ε)`` with ``μ_g``, ``σ_g`` the mean and
    population std of the group's ``[S_g]`` return-to-go values. So the advantage
    varies inside a rollout under any backbone (the property its tests check).

    Returns ``[S]`` advantages; ``extras``: ``base_advantage`` (the configured backbone
    on the original rewards), ``atom_reward``, ``return_to_go`` and ``correction``
    (advantage − base), all ``[S]``; one ledger row per atom event.
    """
    started = time.perf_counter()
    extra, events = atom_rewards(batch, config)  # [S]
    shaped = replace(batch, step_rewards=batch.step_rewards + extra)
    return_to_go = discounted_return_to_go(shaped, 1.0)  # [S]
    step_group = batch.group_index[batch.step_rollout]  # [S]
    advantages = group_relative(return_to_go, step_group, batch.num_groups, norm_by_std=True,
                                eps=config.eps)  # [S]
    elapsed = time.perf_counter() - started
    original, _ = backbone_advantages(batch, config)
    correction = advantages - original.step_advantages  # [S]
    traces, group_ids = batch.traces, batch.group_ids.tolist()
    corr = correction.tolist()
    rows = [{"method": "dense_atom_reward", "task_id": traces[e["rollout"]].task_id,
             "group_id": group_ids[e["rollout"]], "rollout": e["rollout"], "step": e["step"],
             "action": traces[e["rollout"]].actions[e["step"]], "atom_id": e["atom_id"],
             "relation": "dense", "evidence_source": f"status:{e['atom_id']}={e['turned']}",
             "irreversible": traces[e["rollout"]].atom(e["atom_id"]).irreversible,
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
    diagnostics.update({f"base/{k}": v for k, v in original.diagnostics.items()})
    extras = {"base_advantage": original.step_advantages, "atom_reward": extra,
              "return_to_go": return_to_go, "correction": correction}
    return CreditResult(step_advantages=advantages, diagnostics=diagnostics, extras=extras,
                        ledger_rows=rows)
