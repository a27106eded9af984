"""The credit check on scripted policies of chosen skill (docs/credit_check.md §5).

``regime_cell`` plays ``groups`` task groups with ``rollout.scripted.EpsilonPolicy`` at one ``ε``,
computes every credit method that needs no language model on that batch, estimates both
truths (the solver's regret, ``credit_truths.SolverTruth``; the policy's own advantage by
Monte Carlo, ``ScriptedMonteCarlo``, whose continuations follow the same policy from the
replayed state) and scores each method (``credit.accuracy``), with paired differences against
the backbone and against ``random_edges``, and VICT's Table-12 diagnostics
(``table12_row``).

The readings the paper leaves open (``READINGS``: mean centring, the counterfactual atom
marginal, Search-QA's decided answer scope) run as VICT-on-GRPO variants ``vict+<reading>``
on the same rollouts, each also paired with ``vict``; a variant that changes the
environment's verifier gets its own traces.

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
from agentcredit.credit.accuracy import accuracy_table
from agentcredit.credit.step import credit_batch
from agentcredit.credit.vict.method import ABSTAIN_REASONS
from agentcredit.envs.base import Environment
from agentcredit.rollout.records import Trajectory
from agentcredit.rollout.scripted import EpsilonPolicy, PlannerStart, Rewards, play
from agentcredit.train.evaluation.credit_accuracy.check import (
    backbone_of,
    method_pairs,
    method_settings,
    step_layout,
)
from agentcredit.train.evaluation.credit_accuracy.truths import (
    SolverTruth,
    TruthEstimate,
    sent_actions,
    solver_for,
)
from agentcredit.train.scoring.verifier_traces import VerifierTracer

#: the methods that need no language model: backbones, VICT on each, its six controls, SALT,
#: ProxMO.
METHODS = ("grpo", "rloo", "gigpo", "vict", "vict/rloo", "vict/gigpo", "dense_atom_reward",
           "commit_only", "temporal_nearest", "random_edges", "no_core", "no_proof_edges",
           "salt", "proxmo")
#: the readings docs/vict.md §4.5 and docs/searchqa.md leave open, as VICT-on-GRPO variants
#: ``vict+<reading>``: name → (settings, the environments it applies to; ``()``: all).
READINGS = {"vict+mean": (("credit.options.centre=mean",), ()),
            "vict+counterfactual": (("credit.options.marginal=counterfactual",), ()),
            "vict+decided": (("env.searchqa.answer_scope=decided",), ("searchqa",))}
#: the Table-12 diagnostics of VICT, as ``credit_diagnostics`` names them.
TABLE12 = ("trigger_pct", "sparsity_pct", "nonzero_steps_per_rollout", "core_size_mean",
           "budget_hit_pct", "abstain_pct", "lambda")
#: the paper's Table 12 on ALFWorld (the issue's figures), to print beside ours.
PAPER_TABLE12_ALFWORLD = {"trigger_pct": 61.8, "sparsity_pct": 18.6,
                          "nonzero_steps_per_rollout": 4.7, "core_size_mean": 2.9,
                          "budget_hit_pct": 1.4, "abstain_pct": 8.1}


def planner_start(env_name: str) -> PlannerStart:
    """The scripted planner of ``env_name``."""
    if env_name == "alfworld":
        from agentcredit.envs.alfworld.scripted import start
    elif env_name == "webshop":
        from agentcredit.envs.webshop.scripted import start
    elif env_name == "searchqa":
        from agentcredit.envs.searchqa.scripted import start
    elif env_name in ("tau-retail", "tau-airline"):
        from agentcredit.envs.tau.scripted import start
    else:
        raise KeyError(f"environment {env_name!r} has no scripted policy; choose alfworld, "
                       "webshop, searchqa, tau-retail or tau-airline")
    return start


def continuation_rng(seed: int, task_id: str, prefix: Sequence[str], k: int) -> random.Random:
    """The rng of continuation ``k`` from the state ``prefix`` reaches: a function of the state,
    so identical states share their continuations."""
    joined = "\x1f".join(prefix)
    return random.Random(f"{seed}|{task_id}|{len(prefix)}|{joined}|{k}")


class ScriptedMonteCarlo:
    """The scripted policy's advantage ``g_t = V̂(s_{t+1}) − V̂(s_t)``, ``V̂`` the win rate of
    ``K`` continuations of the same policy from the replayed state, with the remaining step
    budget (``credit_truths.MonteCarloTruth``'s estimator, the policy scripted).

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
    (``tied_group_rollout_pct``, from the batch's returns) and the corrected share
    ``Σ|λ·clip(A^VICT)| / Σ|A^base|`` (``corrected_share``)."""
    row = {k: diagnostics[f"vict/{k}"] for k in TABLE12}
    by_reason = {r: diagnostics[f"vict/abstain/{r}_pct"] for r in ABSTAIN_REASONS}
    row.update({f"abstain_{r}_pct": v for r, v in by_reason.items()})
    row["abstain_tie_pct"] = by_reason["tie"]
    row["abstain_tie_group_pct"] = diagnostics["vict/abstain_tie_group_pct"]
    row["abstain_tie_median_pct"] = by_reason["tie"] - row["abstain_tie_group_pct"]
    row["abstain_other_pct"] = sum(v for r, v in by_reason.items() if r != "tie")
    row["tied_group_rollout_pct"] = 100.0 * (1.0 - untied_rollout_share)
    row["corrected_share"] = diagnostics["vict/corrected_share"]
    return row


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


def cell_methods(env_name: str, methods: Sequence[str] = METHODS,
                 readings: Sequence[str] = tuple(READINGS)) -> list[str]:
    """``methods`` and the ``readings`` that apply to ``env_name``."""
    unknown = [r for r in readings if r not in READINGS]
    if unknown:
        raise KeyError(f"readings {unknown} unknown; choose from {', '.join(READINGS)}")
    return [*methods, *(r for r in readings if not READINGS[r][1] or env_name in READINGS[r][1])]


def cell_method_settings(method: str) -> list[str]:
    """The settings of ``method``: ``NAME[/BACKBONE]`` or a reading ``vict+<reading>``."""
    if method in READINGS:
        return method_settings("vict") + list(READINGS[method][0])
    return method_settings(method)


def regime_cell(env_name: str, epsilon: float, options: CellOptions,
                overrides: Sequence[str] = (), methods: Sequence[str] = METHODS,
                readings: Sequence[str] = tuple(READINGS)) -> dict:
    """Every method and reading against both truths on ``options.groups`` groups of the ``ε``
    policy (module notes); plain JSON-ready data."""
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    base = load_config(None, [f"env={env_name}", *overrides])
    configs = {m: load_config(None, [f"env={env_name}", *overrides, *cell_method_settings(m)])
               for m in cell_methods(env_name, methods, readings)}
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

    began = time.perf_counter()
    plain, traced = credit_batch(trajectories), {}  # traced: per environment setting
    suites = {repr(base.env): suite}
    advantages, diagnostics = {}, {}
    for method, config in configs.items():
        key = repr(config.env)
        if "traces" in config.inputs and key not in traced:
            make_env = (suites.get(key) or config.env.build_suite()).make_env
            traced[key] = credit_batch(trajectories, VerifierTracer(make_env).trace(trajectories))
        batch = traced[key] if "traces" in config.inputs else plain
        result = get_estimator(config.credit.estimator)(batch, estimator_config(config.credit))
        advantages[method] = result.step_advantages.double().numpy()
        diagnostics[method] = result.diagnostics
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
                           layout, pairs, boots=options.boots, seed=options.seed)
    signal_rollouts = float(np.mean([layout.group_signal[t.group_id] for t in trajectories]))
    table12 = {m: table12_row(diagnostics[m], signal_rollouts)
               for m in configs if m.partition("/")[0].partition("+")[0] == "vict"}
    return {"env": env_name, "epsilon": epsilon, "groups": len(chosen),
            "rollouts": len(trajectories), "steps": layout.num_steps,
            "success_rate": float(np.mean([t.won for t in trajectories])),
            "signal_group_share": float(layout.group_signal.mean()),
            "truth_stats": {n: {"steps": t.steps, "seconds": t.seconds, **t.stats}
                            for n, t in truths.items()},
            "seconds": seconds, "table12": table12, **table.to_dict()}
