"""The credit check on scripted policies of chosen skill (docs/credit_check.md §6).

``regime_cell`` plays ``groups`` task groups with ``rollout.scripted.EpsilonPolicy`` at one ``ε``,
computes every credit method that needs no language model on that batch, estimates both
truths (the solver's regret, ``truths.SolverTruth``; the policy's own advantage by
Monte Carlo, ``ScriptedMonteCarlo``, whose continuations follow the same policy from the
replayed state) and scores each method (``metrics``), with paired differences against
the backbone and against ``random_edges``, the sign agreement of each VICT variant's
correction and of its base advantage at the corrected steps, and VICT's Table-12 diagnostics
(``table12_row``); ``table12_vs_paper`` sets them beside the paper's Table 12.

The readings the paper leaves open (``READINGS``: the paper-literal median centring, the
counterfactual atom marginal, Search-QA's decided answer scope, and a sweep of the correction
scale ``γ_λ`` in the mid-success cells) run as VICT-on-GRPO variants ``vict+<reading>`` on
the same rollouts, each also paired with ``vict``; a variant that changes the environment's
verifier gets its own traces.

Left out: ADRS (it reads the policy's token scores) and HCAPO (it reads the policy's hindsight
rescoring of its own responses); a scripted policy has neither.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agentcredit.config import estimator_config, load_config
from agentcredit.credit import get_estimator
from agentcredit.credit.vict.method import ABSTAIN_REASONS
from agentcredit.envs.base import Environment
from agentcredit.envs.suites import environment_spec, environment_specs
from agentcredit.rollout.records import Trajectory
from agentcredit.rollout.scripted import EpsilonPolicy, PlannerStart, Rewards, play
from agentcredit.train.evaluation.credit_check.check import (
    backbone_of,
    method_pairs,
    method_settings,
    step_layout,
)
from agentcredit.train.evaluation.credit_check.metrics import accuracy_table
from agentcredit.train.evaluation.credit_check.truths import (
    SolverTruth,
    TruthEstimate,
    sent_actions,
    solver_for,
)
from agentcredit.train.scoring.verifier_traces import VerifierTracer
from agentcredit.train.step_tensors import credit_batch

#: the methods that need no language model: backbones, VICT on each, its six controls, SALT,
#: ProxMO.
METHODS = ("grpo", "rloo", "gigpo", "vict", "vict/rloo", "vict/gigpo", "dense_atom_reward",
           "commit_only", "temporal_nearest", "random_edges", "no_core", "no_proof_edges",
           "salt", "proxmo")


@dataclass(frozen=True)
class Reading:
    """A VICT-on-GRPO variant run beside ``vict`` on the same rollouts.

    Attributes:
        settings: the config settings that make it.
        envs: the environments it applies to (``()``: all).
        success: ``(low, high)``: it runs only in cells whose measured success rate lies in
            this closed range (``None``: every cell), to keep a sweep's cost down.
    """

    settings: tuple[str, ...]
    envs: tuple[str, ...] = ()
    success: tuple[float, float] | None = None


#: the mid-success cells, where a group most often holds wins and losses
MID_SUCCESS = (0.3, 0.7)
#: the readings docs/vict.md §4.5-4.6 and docs/searchqa.md leave open, as VICT-on-GRPO variants
#: ``vict+<reading>`` (the default ``vict`` centres on the mean with ``γ_λ = 0.5``).
READINGS = {
    "vict+median": Reading(("credit.options.centre=median",)),
    "vict+counterfactual": Reading(("credit.options.marginal=counterfactual",)),
    "vict+decided": Reading(("env.searchqa.answer_scope=decided",), ("searchqa",)),
    "vict+gamma0.25": Reading(("credit.options.gamma_lambda=0.25",), success=MID_SUCCESS),
    "vict+gamma1": Reading(("credit.options.gamma_lambda=1.0",), success=MID_SUCCESS),
}
#: the Table-12 diagnostics of VICT, as ``credit_diagnostics`` names them: the paper's reading
#: (abstention per fact, actions per triggered rollout, the core as picked and closure atoms)
#: and the figures read our first way, under their own names.
TABLE12 = ("trigger_pct", "sparsity_pct", "nonzero_steps_per_triggered",
           "nonzero_steps_per_rollout", "core_size_mean", "core_picked_mean",
           "core_closure_mean", "budget_hit_pct", "abstain_fact_pct", "abstain_pct", "lambda")
#: the VICT paper's Table 12 per environment (final training rollouts; Search-QA has no row),
#: keyed as ``table12_row`` names our figures, with ``top_reason`` its top abstention reason
#: and ``success`` the success rate of the paper's VICT policy the rollouts came from. The
#: paper states no success rate of those rollouts themselves, only its final evaluations, and
#: not which model size its Table 12 ALFWorld / WebShop rows come from: the
#: success is the mean of its two VICT rows (Table 1: ALFWorld 91.0 and 93.7% average
#: success, WebShop 81.7 and 83.6% strict success, Qwen2.5-1.5B and 7B); tau is its VICT
#: pass@1 (Table 3: Retail 56.6%, Airline 45.1%).
PAPER_TABLE12 = {
    "alfworld": {"success": 0.9235, "trigger_pct": 61.8, "sparsity_pct": 18.6,
                 "nonzero_steps_per_triggered": 4.7, "core_size_mean": 2.9,
                 "budget_hit_pct": 1.4, "abstain_fact_pct": 8.1,
                 "top_reason": "terminal-only fact"},
    "webshop": {"success": 0.8265, "trigger_pct": 57.2, "sparsity_pct": 15.3,
                "nonzero_steps_per_triggered": 2.2, "core_size_mean": 3.4,
                "budget_hit_pct": 2.1, "abstain_fact_pct": 11.6,
                "top_reason": "ambiguous product evidence"},
    "tau-retail": {"success": 0.566, "trigger_pct": 52.9, "sparsity_pct": 12.8,
                   "nonzero_steps_per_triggered": 3.1, "core_size_mean": 4.6,
                   "budget_hit_pct": 4.8, "abstain_fact_pct": 14.3,
                   "top_reason": "missing confirmation witness"},
    "tau-airline": {"success": 0.451, "trigger_pct": 49.5, "sparsity_pct": 11.7,
                    "nonzero_steps_per_triggered": 3.4, "core_size_mean": 5.1,
                    "budget_hit_pct": 5.6, "abstain_fact_pct": 15.8,
                    "top_reason": "unresolved policy precondition"},
}


def planner_start(env_name: str) -> PlannerStart:
    """The scripted planner of ``env_name`` (its ``planner`` hook, ``envs.suites``)."""
    start = environment_spec(env_name).hook("planner")
    if start is None:
        have = [spec.name for spec in environment_specs() if spec.planner is not None]
        raise KeyError(f"environment {env_name!r} has no scripted policy; choose "
                       f"{', '.join(sorted(have))}, or give it one "
                       "(register_environment(..., planner='module:start'))")
    return start


def continuation_rng(seed: int, task_id: str, prefix: Sequence[str], k: int) -> random.Random:
    """The rng of continuation ``k`` from the state ``prefix`` reaches: a function of the state,
    so identical states share their continuations."""
    joined = "\x1f".join(prefix)
    return random.Random(f"{seed}|{task_id}|{len(prefix)}|{joined}|{k}")


class ScriptedMonteCarlo:
    """The scripted policy's advantage ``g_t = V̂(s_{t+1}) − V̂(s_t)``, ``V̂`` the win rate of
    ``K`` continuations of the same policy from the replayed state, with the remaining step
    budget (``truths.MonteCarloTruth``'s estimator, the policy scripted).

    Args:
        env: an environment to replay in.
        policy: the policy that made the rollouts.
        max_steps: the rollouts' step limit.
        continuations: ``K`` per state.
        seed: seeds the continuations.
        threshold: ``θ`` of the sign metrics.
    """

    name = "mc"

    def __init__(self, env: Environment, policy: EpsilonPolicy, max_steps: int,
                 continuations: int = 16, seed: int = 0, threshold: float = 0.25):
        if continuations < 1:
            raise ValueError(f"ScriptedMonteCarlo: continuations = {continuations}; use >= 1")
        self.env, self.policy, self.max_steps = env, policy, max_steps
        self.k, self.seed, self.threshold = continuations, seed, threshold

    def value(self, trajectory: Trajectory, t: int) -> float:
        """``V̂(s_t)`` of ``trajectory``'s state before step ``t``."""
        prefix = sent_actions(trajectory)[:t]
        wins = [play(self.env, trajectory.task, self.policy,
                     continuation_rng(self.seed, trajectory.task.task_id, prefix, k),
                     self.max_steps, prefix).won for k in range(self.k)]
        return float(np.mean(wins))

    def estimate(self, trajectories: Sequence[Trajectory],
                 rollouts: Sequence[int] | None = None) -> TruthEstimate:
        began = time.perf_counter()
        offsets = np.cumsum([0] + [len(t.steps) for t in trajectories])[:-1]
        values = np.full(sum(len(t.steps) for t in trajectories), np.nan)
        cache: dict[tuple, float] = {}
        for i in range(len(trajectories)) if rollouts is None else rollouts:
            traj = trajectories[i]
            sent = sent_actions(traj)
            v = []
            for t in range(len(traj.steps) + 1):
                key = (traj.task.task_id, tuple(sent[:t]))
                if key not in cache:
                    cache[key] = (float(traj.won) if t == len(traj.steps) and not traj.truncated
                                  else self.value(traj, t))
                v.append(cache[key])
            v_arr = np.asarray(v)
            values[offsets[i]:offsets[i] + len(traj.steps)] = v_arr[1:] - v_arr[:-1]
        return TruthEstimate(self.name, values, self.threshold, time.perf_counter() - began,
                             {"states": float(len(cache))})


def table12_row(diagnostics: dict[str, float], untied_rollout_share: float) -> dict[str, float]:
    """VICT's Table-12 row from its ``vict/…`` diagnostics (docs/vict.md §4.9): ``TABLE12``,
    abstention by reason, abstention because the rollout tied (``abstain_tie_pct``) apart from
    every other reason (``abstain_other_pct``) and split into the whole group tied
    (``abstain_tie_group_pct``) and a rollout alone at its group's median
    (``abstain_tie_median_pct``), the share of rollouts in groups whose outcomes all tied
    (``tied_group_rollout_pct``, from the batch's returns), the corrected share
    ``Σ|λ·clip(A^VICT)| / Σ|A^base|`` (``corrected_share``), and abstention per fact by reason
    (``abstain_fact_<reason>_pct``) with the top one (``abstain_fact_top_reason``, ``"-"``
    when no fact abstained)."""
    row: dict = {k: diagnostics[f"vict/{k}"] for k in TABLE12}
    by_reason = {r: diagnostics[f"vict/abstain/{r}_pct"] for r in ABSTAIN_REASONS}
    row.update({f"abstain_{r}_pct": v for r, v in by_reason.items()})
    by_fact = {r: diagnostics[f"vict/abstain_fact/{r}_pct"] for r in ABSTAIN_REASONS}
    row.update({f"abstain_fact_{r}_pct": v for r, v in by_fact.items()})
    top = max(ABSTAIN_REASONS, key=lambda r: by_fact[r])
    row["abstain_fact_top_reason"] = top if by_fact[top] > 0 else "-"
    row["abstain_tie_pct"] = by_reason["tie"]
    row["abstain_tie_group_pct"] = diagnostics["vict/abstain_tie_group_pct"]
    row["abstain_tie_median_pct"] = by_reason["tie"] - row["abstain_tie_group_pct"]
    row["abstain_other_pct"] = sum(v for r, v in by_reason.items() if r != "tie")
    row["tied_group_rollout_pct"] = 100.0 * (1.0 - untied_rollout_share)
    row["corrected_share"] = diagnostics["vict/corrected_share"]
    return row


def table12_vs_paper(cells: Sequence[dict], method: str = "vict") -> dict[str, dict]:
    """Per environment with a row in ``PAPER_TABLE12``: ``method``'s Table-12 row at the cell
    whose measured success rate is nearest the paper's, beside the paper's row, with the
    ratio ours / paper of every figure the paper gives (docs/credit_check.md §6).

    ``cells`` are ``regime_cell`` results. Returns env → ``epsilon`` and ``success_rate`` of
    the chosen cell, ``paper_success``, ``ours`` (the full row), ``paper`` and ``ratio``.
    """
    out = {}
    for env, paper in PAPER_TABLE12.items():
        candidates = [c for c in cells if c["env"] == env]
        if not candidates:
            continue
        cell = min(candidates, key=lambda c: abs(c["success_rate"] - paper["success"]))
        ours = cell["table12"][method]
        figures = {k: v for k, v in paper.items() if k not in ("success", "top_reason")}
        out[env] = {"epsilon": cell["epsilon"], "success_rate": cell["success_rate"],
                    "paper_success": paper["success"], "ours": ours,
                    "paper": {k: v for k, v in paper.items() if k != "success"},
                    "ratio": {k: ours[k] / v for k, v in figures.items()}}
    return out


@dataclass
class CellOptions:
    """One cell of the grid.

    Attributes:
        groups: task groups played (each ``rollout.group_size`` rollouts).
        mc_groups: groups (the first ones) the Monte Carlo truth covers; 0: all.
        continuations: ``K`` of the Monte Carlo truth.
        tie_breaks: the solver truth's tie-breaks.
        boots: bootstrap draws of groups.
        seed: seeds the tasks, the rollouts, the continuations and the bootstrap.
    """

    groups: int = 32
    mc_groups: int = 0
    continuations: int = 16
    tie_breaks: int = 2
    boots: int = 500
    seed: int = 0


def collect(env: Environment, tasks, policy: EpsilonPolicy, group_size: int, max_steps: int,
            rewards: Rewards, seed: int) -> list[Trajectory]:
    """``group_size`` rollouts of ``policy`` on each task, rollout ``j`` of group ``g`` seeded
    by ``(seed, g, j)``."""
    return [play(env, task, policy, random.Random(f"{seed}|rollout|{g}|{j}"), max_steps,
                 group_id=g, rewards=rewards)
            for g, task in enumerate(tasks) for j in range(group_size)]


def cell_methods(env_name: str, success: float, methods: Sequence[str] = METHODS,
                 readings: Sequence[str] = tuple(READINGS)) -> list[str]:
    """``methods`` and the ``readings`` that apply to ``env_name`` at a cell of measured
    ``success`` rate."""
    unknown = [r for r in readings if r not in READINGS]
    if unknown:
        raise KeyError(f"readings {unknown} unknown; choose from {', '.join(READINGS)}")

    def applies(reading: Reading) -> bool:
        inside = reading.success is None or reading.success[0] <= success <= reading.success[1]
        return (not reading.envs or env_name in reading.envs) and inside

    return [*methods, *(r for r in readings if applies(READINGS[r]))]


def cell_method_settings(method: str) -> list[str]:
    """The settings of ``method``: ``NAME[/BACKBONE]`` or a reading ``vict+<reading>``."""
    if method in READINGS:
        return method_settings("vict") + list(READINGS[method].settings)
    return method_settings(method)


def regime_cell(env_name: str, epsilon: float, options: CellOptions,
                overrides: Sequence[str] = (), methods: Sequence[str] = METHODS,
                readings: Sequence[str] = tuple(READINGS)) -> dict:
    """Every method and reading against both truths on ``options.groups`` groups of the ``ε``
    policy (module notes); plain JSON-ready data."""
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    base = load_config(None, [f"env={env_name}", *overrides])
    suite = base.env.build_suite()
    tasks = suite.tasks("train")
    rng = random.Random(options.seed)
    chosen = (rng.sample(tasks, options.groups) if options.groups <= len(tasks)
              else rng.choices(tasks, k=options.groups))
    policy = EpsilonPolicy(planner_start(env_name), epsilon)
    rewards = Rewards(base.rollout.invalid_penalty, base.rollout.outcome_reward)
    env = suite.make_env()
    max_steps = base.rollout.max_steps
    trajectories = collect(env, chosen, policy, base.rollout.group_size, max_steps, rewards,
                           options.seed)
    seconds["collect"] = time.perf_counter() - began
    success = float(np.mean([t.won for t in trajectories]))

    began = time.perf_counter()
    configs = {m: load_config(None, [f"env={env_name}", *overrides, *cell_method_settings(m)])
               for m in cell_methods(env_name, success, methods, readings)}
    plain, traced = credit_batch(trajectories), {}  # traced: per environment setting
    suites = {repr(base.env): suite}
    advantages, diagnostics, corrections = {}, {}, {}
    for method, config in configs.items():
        key = repr(config.env)
        if "traces" in config.inputs and key not in traced:
            make_env = (suites.get(key) or config.env.build_suite()).make_env
            traced[key] = credit_batch(trajectories, VerifierTracer(make_env).trace(trajectories))
        batch = traced[key] if "traces" in config.inputs else plain
        result = get_estimator(config.credit.estimator)(batch, estimator_config(config.credit))
        advantages[method] = result.step_advantages.double().numpy()
        diagnostics[method] = result.diagnostics
        if _is_vict(method):
            corrections[method] = (result.extras["correction"].double().numpy(),
                                   result.extras["base_advantage"].double().numpy())
    seconds["credit"] = time.perf_counter() - began

    truths = {}
    began = time.perf_counter()
    truths["solver"] = SolverTruth(suite.make_env, solver_for(env_name), cap=max_steps,
                                   tie_breaks=options.tie_breaks, seed=options.seed
                                   ).estimate(trajectories)
    seconds["solver"] = time.perf_counter() - began
    began = time.perf_counter()
    covered = options.mc_groups or options.groups
    rollouts = [i for i, t in enumerate(trajectories) if t.group_id < covered]
    truths["mc"] = ScriptedMonteCarlo(suite.make_env(), policy, max_steps,
                                      options.continuations, options.seed
                                      ).estimate(trajectories, rollouts)
    seconds["mc"] = time.perf_counter() - began

    layout = step_layout(trajectories)
    pairs = method_pairs(list(configs), {m: backbone_of(c) for m, c in configs.items()})
    pairs += [(m, "vict") for m in configs if m in READINGS and "vict" in configs]
    table = accuracy_table(advantages, {n: t.truth_values() for n, t in truths.items()},
                           layout, pairs, corrections=corrections, boots=options.boots,
                           seed=options.seed)
    signal_rollouts = float(np.mean([layout.group_signal[t.group_id] for t in trajectories]))
    table12 = {m: table12_row(diagnostics[m], signal_rollouts) for m in configs if _is_vict(m)}
    return {"env": env_name, "epsilon": epsilon, "groups": len(chosen),
            "rollouts": len(trajectories), "steps": layout.num_steps,
            "success_rate": success,
            "signal_group_share": float(layout.group_signal.mean()),
            "truth_stats": {n: {"steps": t.steps, "seconds": t.seconds, **t.stats}
                            for n, t in truths.items()},
            "seconds": seconds, "table12": table12, **table.to_dict()}


def _is_vict(method: str) -> bool:
    """VICT on some backbone or one of its readings (``vict``, ``vict/gigpo``, ``vict+median``)."""
    return method.partition("/")[0].partition("+")[0] == "vict"
