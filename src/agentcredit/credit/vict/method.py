"""VICT end to end on one batch (docs/vict.md §4).

One update's credit reads top to bottom in ``compute_credit``:

1. BASE: the backbone's ``A^base [S]`` and the rollout-level ``A^base_i [B]``.
2. CONFORMANCE: a task whose rollouts or mutants have ``|F − V| > η_x`` is
   non-conforming; all its rollouts abstain (docs/vict.md §4.2).
3. MARGINALS: the raw atom values ``δ [N, J]`` of each group (``VICTConfig.marginal``),
   robustly normalised to ``δ̂`` (``VICTConfig.centre``; docs/vict.md §4.5).
4. CORES: direction ``q_i``, magnitude ``ρ_i``, the budgeted greedy core ``C*_i``
   (docs/vict.md §4.4).
5. WITNESSES: each core atom with ``δ̂ ≠ 0`` spreads ``δ̂`` over its witness
   steps in proportion to ``ω_{i,t,j}`` (docs/vict.md §4.6); an atom without one abstains.
6. CORRECTION: ``A^VICT [S]``, ``λ``, ``c``, ``A^final``; the eligibility
   invariant is checked on every non-zero entry (docs/vict.md §4.7).

The ablations of docs/vict.md §4.8 run the same function with another ``CreditRule``
(``credit/vict/ablations.py``); only the steps that receive credit change. The
``vict`` estimator (``credit/vict/estimator.py``) packages the computation with
its ledger rows and diagnostics. Everything is read off the batch's plain
``RolloutTrace`` records: atom roles and timings from ``trace.atoms``, ``F``
from ``trace.aggregate``; no live verifier.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.gigpo import GiGPOConfig
from agentcredit.credit.grpo import group_relative
from agentcredit.credit.registry import get_estimator
from agentcredit.credit.result import CreditResult
from agentcredit.credit.vict.config import VICTConfig
from agentcredit.credit.vict.core import base_direction, greedy_core, preference_magnitude
from agentcredit.credit.vict.correction import (
    Contribution,
    assemble,
    check_eligibility,
    correction_scale,
    final_advantage,
    signal_steps,
)
from agentcredit.credit.vict.edges import Witness, proof_witnesses
from agentcredit.credit.vict.normalise import atom_marginals, robust_normalise
from agentcredit.verifier.closure import indices_of
from agentcredit.verifier.trace import RolloutTrace

#: why a rollout received no correction although VICT ran on it (docs/vict.md §4.4-4.7).
ABSTAIN_REASONS = ("non_conforming", "tie", "budget", "no_edge", "terminal_only")
#: every per-rollout outcome: credited, an abstention, or nothing to credit
#: (``empty_core``: no verifier-score gap to explain; ``zero_marginal``: every
#: core atom has ``δ̂ = 0`` because the rollout matches its group's median).
OUTCOMES = ("credited",) + ABSTAIN_REASONS + ("empty_core", "zero_marginal")

WitnessRule = Callable[[RolloutTrace], dict[str, list[Witness]]]


@dataclass(frozen=True)
class CreditRule:
    """Which atoms and which steps receive credit: VICT or one of its controls.

    Attributes:
        name: the estimator's name (``vict``, ``commit_only`` …), written to the ledger.
        witnesses: per trace, the witness steps of each atom.
        use_core: credit only the greedy core ``C*_i`` (False: every atom with ``δ̂ ≠ 0``).
        permute: the ``random_edges`` placebo: deal the credited steps across the group.
        eligibility: check docs/vict.md §4.7's invariant (VICT only; the controls break it on
            purpose).
    """

    name: str
    witnesses: WitnessRule
    use_core: bool = True
    permute: bool = False
    eligibility: bool = False


VICT_RULE = CreditRule("vict", proof_witnesses, eligibility=True)


@dataclass(frozen=True)
class RolloutCredit:
    """What VICT decided for one rollout.

    Attributes:
        rollout: ``i``.
        group: dense group index.
        direction: ``q_i``.
        magnitude: ``ρ_i`` (score units).
        outcome: one of ``OUTCOMES``.
        core: ``C*_i`` atom ids (closure atoms included); empty unless a core was found.
        additions: greedy additions made (0 without a core search).
        delta_hat: ``δ̂_{i,j}`` per atom id.
        unproven: core atoms with ``δ̂ ≠ 0`` but no witness, with their reason
            (``no_edge`` or ``terminal_only``).
        picked: the core atoms the greedy search chose (``CoreSearch.picked``); the rest of
            ``core`` came with their closure. Without a core search (``no_core``) every atom.
    """

    rollout: int
    group: int
    direction: int
    magnitude: float
    outcome: str
    core: frozenset[str]
    additions: int
    delta_hat: dict[str, float]
    unproven: tuple[tuple[str, str], ...] = ()
    picked: frozenset[str] = frozenset()

    @property
    def abstained(self) -> bool:
        return self.outcome in ABSTAIN_REASONS


@dataclass
class VictComputation:
    """Everything one VICT pass computed; the estimator, the ledger and the diagnostics read it.

    Attributes:
        config: the options it ran with.
        rule: the credit rule that ran.
        backbone: the backbone's own result (``A^base`` and its diagnostics/extras).
        base: ``A^base [S]``.
        rollout_base: ``A^base_i [B]`` (GiGPO: its episode level).
        conforming: ``[B]`` the rollout's task conforms.
        rollouts: one ``RolloutCredit`` per rollout.
        contributions: every atom share of every credited step.
        vict: ``A^VICT [S]`` (float64), before scaling.
        lam: ``λ``.
        clip: ``c``.
        correction: ``λ · clip(A^VICT, −c, c) [S]``.
        final: ``A^final [S]``.
        eligibility_checked: non-zero ``A^VICT`` entries that passed the invariant.
        wall_ms: time VICT added on top of the backbone.
    """

    config: VICTConfig
    rule: CreditRule
    backbone: CreditResult
    base: Tensor
    rollout_base: Tensor
    conforming: list[bool]
    rollouts: list[RolloutCredit]
    contributions: list[Contribution]
    vict: Tensor
    lam: float
    clip: float
    correction: Tensor
    final: Tensor
    eligibility_checked: int = 0
    wall_ms: float = 0.0


def require_traces(batch: CreditBatch, method: str) -> tuple[RolloutTrace, ...]:
    """The batch's traces, checked to share one task per group; a clear error without them."""
    if batch.traces is None:
        raise ValueError(
            f"{method} needs one RolloutTrace per rollout: trace each rollout with "
            "agentcredit.verifier.trace.trace_rollout(verifier, observations, snapshots, "
            "actions) and build the batch with CreditBatch(..., traces=traces).")
    traces = batch.traces
    first: dict[int, RolloutTrace] = {}
    for i, g in enumerate(batch.group_index.tolist()):
        seen = first.setdefault(g, traces[i])
        if traces[i].task_id != seen.task_id or traces[i].atom_ids != seen.atom_ids:
            raise ValueError(
                f"rollout {i} traces task {traces[i].task_id!r} (atoms {traces[i].atom_ids}) but "
                f"its group traces task {seen.task_id!r} (atoms {seen.atom_ids}); a group is "
                "the rollouts of one task.")
    return traces


def backbone_advantages(batch: CreditBatch, config: VICTConfig) -> tuple[CreditResult, Tensor]:
    """The backbone's result and the rollout-level ``A^base_i [B]`` that sets ``q_i``: the
    ``episode_advantage`` a step-level backbone returns (SALT, HCAPO, ProxMO), GiGPO's
    episode level, else the (rollout-constant) advantage of the rollout's first step."""
    backbone_config = config.backbone
    result = get_estimator(backbone_config.config_name)(batch, backbone_config)
    if "episode_advantage" in result.extras:
        rollout_base = result.extras["episode_advantage"]
    elif isinstance(backbone_config, GiGPOConfig):
        rollout_base = group_relative(batch.returns, batch.group_index, batch.num_groups,
                                      norm_by_std=backbone_config.mode == "mean_std_norm",
                                      eps=backbone_config.eps)
    else:
        lengths = batch.episode_lengths
        starts = torch.cumsum(lengths, 0) - lengths  # [B] first step of each rollout
        rollout_base = result.step_advantages[starts]
    return result, rollout_base


def compute_credit(batch: CreditBatch, config: VICTConfig,
                   rule: CreditRule = VICT_RULE) -> VictComputation:
    """Run VICT (or a control, via ``rule``) on ``batch``; see the module docstring."""
    traces = require_traces(batch, rule.name)
    backbone, rollout_base = backbone_advantages(batch, config)
    started = time.perf_counter()
    base = backbone.step_advantages  # [S]
    groups = batch.group_index.tolist()  # [B]
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)

    # CONFORMANCE
    group_ok = {g: max(traces[i].conformance_error for i in rows) <= config.conformance_tolerance
                for g, rows in members.items()}
    conforming = [group_ok[g] for g in groups]

    # MARGINALS
    delta_hat: list[dict[str, float]] = [{} for _ in groups]
    same_shape: dict[tuple[int, int], list[list[int]]] = {}  # groups normalised in one call
    for rows in members.values():
        same_shape.setdefault((len(rows), len(traces[rows[0]].atom_ids)), []).append(rows)
    for (size, num_atoms), stack in same_shape.items():
        raw = torch.tensor([[atom_marginals(traces[i], config.marginal) for i in rows]
                            for rows in stack],
                           dtype=torch.float64).reshape(len(stack), size, num_atoms)  # [G, N, J]
        normalised = robust_normalise(raw, config.eps, config.centre).tolist()  # [G, N, J]
        for rows, values in zip(stack, normalised, strict=True):
            ids = traces[rows[0]].atom_ids
            for i, row in zip(rows, values, strict=True):
                delta_hat[i] = dict(zip(ids, row, strict=True))

    # CORES AND WITNESSES
    directions = base_direction(rollout_base.tolist(), config.eps_q)
    magnitudes = preference_magnitude([t.v_score for t in traces], groups)
    lengths = batch.episode_lengths.tolist()
    offsets = [0]
    for n in lengths[:-1]:
        offsets.append(offsets[-1] + n)
    rollouts, contributions = [], []
    for i, trace in enumerate(traces):
        credit, shares = _credit_rollout(i, groups[i], trace, conforming[i], directions[i],
                                         magnitudes[i], delta_hat[i], config, rule)
        contributions += [Contribution(i, w.step, offsets[i] + w.step, atom_id,
                                       delta_hat[i][atom_id], w.weight, share, w.relations,
                                       w.sources)
                          for atom_id, w, share in shares]
        rollouts.append(credit)
    if rule.permute:
        group_ids = batch.group_ids.tolist()
        contributions = _shuffle_across_group(
            contributions, {group_ids[rows[0]]: rows for rows in members.values()}, lengths,
            offsets, config.seed)

    # CORRECTION
    vict = assemble(contributions, batch.num_steps, base.device)  # [S]
    checked = 0
    if rule.eligibility:
        checked = check_eligibility(vict, batch.step_rollout.tolist(), batch.step_index.tolist(),
                                    traces, conforming, [r.core for r in rollouts], delta_hat)
    signal = signal_steps(base, batch.group_index[batch.step_rollout], batch.num_groups)  # [S]
    lam, clip = correction_scale(base, vict, gamma_lambda=config.gamma_lambda, eps=config.eps,
                                 clip_quantile=config.clip_quantile,
                                 base_steps=config.lambda_base_steps, signal=signal)
    final, correction = final_advantage(base, vict, lam, clip)
    return VictComputation(
        config=config, rule=rule, backbone=backbone, base=base, rollout_base=rollout_base,
        conforming=conforming, rollouts=rollouts, contributions=contributions, vict=vict,
        lam=lam, clip=clip, correction=correction, final=final, eligibility_checked=checked,
        wall_ms=1000.0 * (time.perf_counter() - started))


def _credit_rollout(i: int, group: int, trace: RolloutTrace, conforming: bool, direction: int,
                    magnitude: float, delta_hat: dict[str, float], config: VICTConfig,
                    rule: CreditRule) -> tuple[RolloutCredit, list[tuple[str, Witness, float]]]:
    """The decision and the witness shares ``(atom, witness, ω/Z)`` of one rollout."""
    picked: frozenset[str] = frozenset()  # set by the core search below, read by decided()

    def decided(outcome: str, core: frozenset[str] = frozenset(), additions: int = 0,
                unproven: tuple = ()) -> RolloutCredit:
        return RolloutCredit(i, group, direction, magnitude, outcome, core, additions,
                             delta_hat, unproven, picked)

    if not conforming:
        return decided("non_conforming"), []
    if direction == 0:  # no_core too: without a direction there is no sign to give
        return decided("tie"), []
    ids, graph = trace.atom_ids, trace.graph
    if rule.use_core:
        roles = [a.score_role for a in trace.atoms]
        search = greedy_core(trace.statuses[-1], direction, magnitude, graph, roles,
                             trace.aggregate, config.budget)
        if not search.reached:
            return decided("budget", additions=search.additions), []
        core = frozenset(ids[j] for j in indices_of(search.core))
        picked = frozenset(ids[j] for j in indices_of(search.picked))
        additions = search.additions
        if not core:
            return decided("empty_core"), []
    else:
        core = frozenset(a for j, a in enumerate(ids)
                         if delta_hat[a] != 0.0 and not graph.excluded >> j & 1)
        picked = core
        additions = 0
    active = [a for a in ids if a in core and delta_hat[a] != 0.0]
    if not active:
        return decided("zero_marginal", core, additions), []
    witnesses = rule.witnesses(trace)
    shares, unproven = [], []
    for atom_id in active:
        steps = witnesses.get(atom_id, [])
        total = sum(w.weight for w in steps)  # Z_{i,j}
        if total <= 0:
            when = trace.atom(atom_id).evaluable_when
            unproven.append((atom_id, "terminal_only" if when == "terminal_only" else "no_edge"))
            continue
        shares += [(atom_id, w, w.weight / total) for w in steps]
    if shares:
        return decided("credited", core, additions, tuple(unproven)), shares
    reasons = {reason for _, reason in unproven}
    outcome = "terminal_only" if reasons == {"terminal_only"} else "no_edge"
    return decided(outcome, core, additions, tuple(unproven)), []


def _shuffle_across_group(contributions: list[Contribution], members: dict[int, list[int]],
                          lengths: list[int], offsets: list[int],
                          seed: int) -> list[Contribution]:
    """The ``random_edges`` placebo: VICT's credited steps dealt at random across the group.

    Per group, each credited step's bundle (the contributions on that step, with the
    ``δ̂`` of the rollout that earned them) is shuffled among the group's credited
    bundles, then rollout ``i`` receives as many bundles as it had credited steps,
    placed on that many distinct steps drawn from its own ``T_i``. So credit crosses
    rollouts while each rollout's count of credited steps and the group's total stay.
    ``members`` maps the batch's group id to its rollouts; the draw is seeded by
    ``seed`` and that id, which the collector makes new every update
    (``first_group_id``), so the placebo is fresh each update and reproducible.
    """
    bundles: dict[tuple[int, int], list[Contribution]] = {}
    for c in contributions:
        bundles.setdefault((c.rollout, c.step), []).append(c)
    out = []
    for group_id, rows in members.items():
        rng = random.Random(f"{seed}/{group_id}")
        owned = {i: sorted(key for key in bundles if key[0] == i) for i in rows}
        pool = [bundles[key] for i in rows for key in owned[i]]
        rng.shuffle(pool)
        for i in rows:
            count = len(owned[i])
            steps = rng.sample(range(lengths[i]), count)
            for bundle, t in zip(pool[:count], steps, strict=True):
                out += [replace(c, rollout=i, step=t, flat_step=offsets[i] + t,
                                relations=("random",),
                                sources=(f"placebo: edge of rollout {c.rollout} step {c.step}",))
                        for c in bundle]
            pool = pool[count:]
    return out
