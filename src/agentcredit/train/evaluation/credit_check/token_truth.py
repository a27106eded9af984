"""The token-level truth of docs/credit_check.md §3: each response token's share of its step's
solver advantage, by re-decoding the response from each of its prefixes.

For a step at state ``s_t`` with response tokens ``y_1 … y_n``::

    g(a)    = d(s_t) − d(s_t ⊕ a) − 1       the solver regret of action a (an invalid a: −1)
    Q̂_j     = (1/K) Σ_k g(parse(y_≤j ⊕ y'_k)), y'_k ~ π(· | h_s, y_≤j)      j = 0 … n−1
    Q̂_n     = g(parse(y_≤n))                 the step's own regret
    τ_{s,j} = Q̂_j − Q̂_{j−1}                  j = 1 … n

so ``Σ_j τ_{s,j} = g^S_t − Q̂_0``. Continuations are the collector's policy at the rollout
temperature on the step's own prompt followed by ``y_≤j``, with the budget the response had
left (``max_new_tokens − j``); each distinct action is scored once. Free decoding only: an
admissible-decoding run would need its action trie advanced past ``y_≤j``, so it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from agentcredit.envs.base import replayed
from agentcredit.rollout.actions import parse_action
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.rollout.records import Trajectory
from agentcredit.train.evaluation.credit_check.metrics import (
    MIN_ROLLOUT_STEPS,
    RANDOM_ROW,
    within_rollout_rhos,
)
from agentcredit.train.evaluation.credit_check.truths import DistanceFn, recorded_observations


class TokenTruth:
    """``τ`` per token of chosen steps (see the module docstring).

    Args:
        collector: the collector that made the rollouts (policy, environments, prompt format,
            ``max_new_tokens``, decoding).
        distance: the environment's solver (``truths.solver_for``).
        cap: ``D``, the most steps ``d`` counts.
        temperature: the rollouts' sampling temperature.
        continuations: ``K`` per prefix.
        seed: seeds the continuations' sampling.
    """

    def __init__(self, collector: RolloutCollector, distance: DistanceFn, cap: int,
                 temperature: float, continuations: int = 4, seed: int = 0):
        if collector.config.decoding != "free":
            raise ValueError(f"the token truth re-decodes responses from their prefixes, which "
                             f"rollout.decoding = {collector.config.decoding!r} cannot do; use "
                             "rollout.decoding=free")
        if continuations < 1:
            raise ValueError(f"TokenTruth: continuations = {continuations}; use 1 or more")
        self.collector, self.distance, self.cap = collector, distance, cap
        self.temperature, self.k, self.seed = temperature, continuations, seed

    def _regret(self, env, traj: Trajectory, t: int, text: str, memo: dict[str, float]
                ) -> float:
        """``g`` of the response ``text`` at step ``t`` of ``traj``, memoised by action;
        ``memo[""]`` holds ``d(s_t)``."""
        fmt = self.collector.config.prompt.action_format
        action = parse_action(text, fmt)
        sent = text if action is None else action
        if sent not in memo:
            prefix = [s.response if s.action is None else s.action
                      for s in traj.steps[:t] if s.valid]
            seen = [o for s, o in zip(traj.steps[:t], recorded_observations(traj), strict=False)
                    if s.valid]
            if "" not in memo:
                memo[""] = self.distance(env, traj.task, prefix, self.cap, None, seen)
            for _ in replayed(env, traj.task, prefix, seen):
                pass
            obs, _, _, info = env.step(sent)  # valid there? (an invalid one changes nothing)
            after = (self.distance(env, traj.task, [*prefix, sent], self.cap, None,
                                   [*seen, obs.text]) if info.valid else memo[""])
            memo[sent] = float(memo[""] - after - 1)
        return memo[sent]

    def estimate(self, trajectories: Sequence[Trajectory], steps: Sequence[tuple[int, int]]
                 ) -> dict[tuple[int, int], np.ndarray]:
        """``(rollout, step) -> [n]`` ``τ`` of each token of the step's response."""
        policy, cfg = self.collector.policy, self.collector.config
        generator = torch.Generator().manual_seed(self.seed)
        env = self.collector.make_env()
        out = {}
        for i, t in steps:
            traj = trajectories[i]
            step = traj.steps[t]
            ids = list(step.response_ids)
            memo: dict[str, float] = {}
            q = np.empty(len(ids) + 1)
            for j in range(len(ids)):
                head = policy.tokenizer.decode(ids[:j], skip_special_tokens=True)
                prompts = [list(step.prompt_ids) + ids[:j]] * self.k
                generations = policy.generate(prompts, temperature=self.temperature,
                                              max_new_tokens=max(cfg.max_new_tokens - j, 1),
                                              generator=generator)
                q[j] = np.mean([self._regret(env, traj, t, head + g.text, memo)
                                for g in generations])
            q[-1] = self._regret(env, traj, t, step.response, memo)
            out[(i, t)] = q[1:] - q[:-1]
        close = getattr(env, "close", None)
        if close is not None:
            close()
        return out


def chosen_steps(trajectories: Sequence[Trajectory], count: int) -> list[tuple[int, int]]:
    """The first ``count`` steps, in batch order, whose response has at least
    ``MIN_ROLLOUT_STEPS`` tokens (fewer leave no ranking to compare)."""
    found = [(i, t) for i, traj in enumerate(trajectories) for t, step in enumerate(traj.steps)
             if len(step.response_ids) >= MIN_ROLLOUT_STEPS]
    return found[:count]


def token_credit(trajectories: Sequence[Trajectory], rows: torch.Tensor, loss_mask: torch.Tensor,
                 steps: Sequence[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
    """``(rollout, step) -> [n]`` a method's per-token credit of each chosen step, from its
    ``[S, L]`` rows (``CreditResult.per_token``) and the ``[S, L]`` response mask."""
    offsets = np.cumsum([0] + [len(t.steps) for t in trajectories]).tolist()
    return {(i, t): rows[offsets[i] + t][loss_mask[offsets[i] + t]].double().numpy()
            for i, t in steps}


def token_within(credit: Mapping[str, dict[tuple[int, int], np.ndarray]],
                 tau: dict[tuple[int, int], np.ndarray], seed: int = 0, boots: int = 1000
                 ) -> dict:
    """Each method's ``token_within`` (docs/credit_check.md §3): the within-step Spearman ρ of
    its token credit and ``τ``, averaged over the steps where ``τ`` is not constant, with a 95%
    percentile bootstrap interval over those steps (``boots`` draws, the same draws for every
    method); and the ``random`` row (i.i.d. normal credit).

    Returns:
        ``{"steps": checked steps, "scored_steps": steps with a non-constant τ, "methods":
        {name: {"value", "low", "high"}}}``; ``None`` values when no step qualifies.
    """
    keys = list(tau)
    truth = np.concatenate([tau[k] for k in keys]) if keys else np.zeros(0)
    step = np.concatenate([np.full(tau[k].size, n) for n, k in enumerate(keys)]) \
        if keys else np.zeros(0, dtype=int)
    rng = np.random.default_rng(seed)
    rows = {name: np.concatenate([values[k] for k in keys]) if keys else np.zeros(0)
            for name, values in credit.items()}
    rows[RANDOM_ROW] = rng.standard_normal(truth.size)
    rhos = {name: within_rollout_rhos(values, truth, step) for name, values in rows.items()}
    scored = np.flatnonzero(np.isfinite(rhos[RANDOM_ROW]))  # where τ varies: every method's
    draws = rng.integers(0, scored.size, size=(boots, scored.size)) if scored.size else None
    methods = {}
    for name, per_step in rhos.items():
        values = per_step[scored]
        if draws is None:
            methods[name] = {"value": None, "low": None, "high": None}
            continue
        low, high = np.quantile(values[draws].mean(1), [0.025, 0.975])
        methods[name] = {"value": float(values.mean()), "low": float(low), "high": float(high)}
    return {"steps": len(keys), "scored_steps": int(scored.size), "methods": methods}
