"""The true value of each action of a batch of rollouts, by replaying them (docs/credit_check.md).

Two truths, one interface (``Truth``: ``estimate(trajectories, rollouts) -> TruthEstimate``):

- ``SolverTruth``: regret against a solver that knows only what the prefix showed,
  ``g_t = d(s_t) − d(s_{t+1}) − 1`` with ``d`` the solver's steps to finish, capped, averaged
  over its random tie-breaks. An environment provides ``d`` as the ``solver`` hook of its
  registration (``envs.suites.register_environment``; ALFWorld: the demonstrator's
  ``distance_to_finish``; Search-QA: ``distance_to_answer``; tau: ``distance_to_resolve``).
- ``MonteCarloTruth``: the current policy's advantage, ``g_t = V̂(s_{t+1}) − V̂(s_t)`` with
  ``V̂`` the success rate of ``K`` fresh continuations of the policy (same prompts, decoding,
  temperature and remaining step budget) from the replayed state. ``Q̂(s_t, a_t) = V̂(s_{t+1})``
  holds because the environments are deterministic and pay the outcome at the end, so each
  state's continuations serve both the step before it and the step after it; identical
  prefixes (every group's first state) are estimated once.

Both replay each prefix from reset and raise ``ReplayMismatch`` when the replay shows other
text than the rollout recorded. Values are in the truth's own units (steps of regret;
success probability); ``NaN`` marks steps a truth was not asked to estimate.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from agentcredit.envs.base import Environment, ReplayMismatch, Task
from agentcredit.envs.suites import environment_spec, environment_specs, update_environment
from agentcredit.rollout.actions import parse_action
from agentcredit.rollout.admissible import ActionTrie
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.rollout.policy import PromptCache
from agentcredit.rollout.prompts import build_prompt_ids
from agentcredit.rollout.records import Trajectory
from agentcredit.train.evaluation.credit_check.metrics import TruthValues, pearson

#: ``d(env, task, prefix, cap, rng, observations)``: the solver's steps to finish after
#: ``prefix`` (valid actions only), capped at ``cap``; ``observations`` are the recorded texts
#: after each prefix action, and a replay that differs raises ``ReplayMismatch``.
DistanceFn = Callable[[Environment, Task, Sequence[str], int, random.Random | None,
                       Sequence[str]], int]

#: ``refusal(options) -> reason | None``: why the environment, under its options (``env.<name>``
#: of the config), has no solver truth, or ``None`` when it has one.
RefusalFn = Callable[[object], str | None]

def register_solver(env_name: str, distance: DistanceFn, refusal: RefusalFn | None = None
                    ) -> None:
    """Give the registered environment ``env_name`` a solver truth (``DistanceFn``);
    ``refusal`` names the options under which it has none (checked before a run starts). It
    sets the environment's ``solver`` hook (``envs.suites.EnvironmentSpec``), which an
    environment usually declares when it registers; a second call replaces the first."""
    update_environment(env_name, solver=distance, solver_refusal=refusal)


def solver_for(env_name: str) -> DistanceFn:
    """The solver of ``env_name`` (its ``solver`` hook); a ``KeyError`` lists the environments
    that have one."""
    solver = environment_spec(env_name).hook("solver")
    if solver is None:
        have = [spec.name for spec in environment_specs() if spec.solver is not None]
        raise KeyError(f"environment {env_name!r} has no solver truth (environments with one: "
                       f"{', '.join(sorted(have))}); use the Monte Carlo truth or give it a "
                       "solver (register_environment(..., solver='module:function'))")
    return solver


def solver_refusal(env_name: str, options: object) -> str | None:
    """Why ``env_name`` has no solver truth under its ``options``, or ``None`` when it has one
    (``KeyError`` as ``solver_for`` when it has none at all)."""
    solver_for(env_name)
    refusal = environment_spec(env_name).hook("solver_refusal")
    return None if refusal is None else refusal(options)


@dataclass
class TruthEstimate:
    """One truth on a batch.

    Attributes:
        name: ``solver`` or ``mc``.
        values: ``[S]`` ``g_t`` per flat step of the batch, ``NaN`` where not estimated.
        threshold: ``θ`` of the sign metrics (``TruthValues``).
        seconds: wall time of the estimate.
        stats: what the estimate reports about itself (``mc``: ``se_mean``,
            ``split_half``; both: ``states``; solver: ``replay_steps``, ``solver_calls``).
    """

    name: str
    values: np.ndarray
    threshold: float
    seconds: float
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def steps(self) -> int:
        """Steps with a value."""
        return int(np.isfinite(self.values).sum())

    @property
    def seconds_per_100_steps(self) -> float:
        """Wall time per 100 estimated steps."""
        return 100.0 * self.seconds / max(self.steps, 1)

    def truth_values(self) -> TruthValues:
        """The values as ``metrics`` takes them."""
        return TruthValues(self.values, self.threshold)


class Truth(Protocol):
    """What a truth implements: a name and an estimate on chosen rollouts of a batch."""

    name: str

    def estimate(self, trajectories: Sequence[Trajectory],
                 rollouts: Sequence[int] | None = None) -> TruthEstimate:
        """``g_t`` on every step of ``rollouts`` (indices into ``trajectories``; None: all)."""


def sent_actions(trajectory: Trajectory) -> list[str]:
    """The text each step sent to the environment (the parsed action, else the response)."""
    return [s.response if s.action is None else s.action for s in trajectory.steps]


def recorded_observations(trajectory: Trajectory) -> list[str]:
    """The environment text after each step, as the rollout recorded it."""
    return [s.observation for s in trajectory.steps[1:]] + [trajectory.final_observation]


def _offsets(trajectories: Sequence[Trajectory]) -> list[int]:
    """Flat index of each trajectory's first step."""
    return np.cumsum([0] + [len(t.steps) for t in trajectories])[:-1].tolist()


def _close(envs: Sequence[Environment]) -> None:
    """Give back what the replay environments hold (ALFWorld: a planner library copy each)."""
    for env in envs:
        close = getattr(env, "close", None)
        if close is not None:
            close()


def _chosen(trajectories: Sequence[Trajectory], rollouts: Sequence[int] | None) -> list[int]:
    chosen = list(range(len(trajectories))) if rollouts is None else list(rollouts)
    bad = [i for i in chosen if not 0 <= i < len(trajectories)]
    if bad:
        raise ValueError(f"rollout {bad[0]} is not in the batch of {len(trajectories)}; pick "
                         "rollouts 0..B-1.")
    return chosen


class TieBreaks(random.Random):
    """A seeded ``random.Random`` that counts the ties it broke: choices among two or more
    items, and any other draw. The solver truth plays one tie-break first and the rest only
    when it broke a tie (with none broken, every seed gives the same ``d``)."""

    def __init__(self, seed: int):
        self.ties, self._choosing = 0, False
        super().__init__(seed)

    def choice(self, seq):
        self.ties += len(seq) > 1
        self._choosing = True
        try:
            return super().choice(seq)  # the same draws as random.Random's, ties or not
        finally:
            self._choosing = False

    def random(self) -> float:
        self.ties += 1
        return super().random()

    def getrandbits(self, k: int) -> int:
        self.ties += not self._choosing
        return super().getrandbits(k)


class SolverTruth:
    """Regret against a solver (see the module docstring).

    Args:
        make_env: builds an environment instance to replay in.
        distance: the solver (``solver_for(env_name)``).
        cap: ``D``, the most steps ``d`` counts (the rollout step limit is a good choice).
        tie_breaks: how many random tie-breaks ``d`` is averaged over (0: list order only).
            The same seeds serve every state, so states the prefixes leave identical get the
            same ``d``; a state whose first tie-break broke no tie is played once.
        seed: seeds the tie-breaks.
        threshold: ``θ`` in steps (0.5: at least half a step of regret, on average).
    """

    name = "solver"

    def __init__(self, make_env: Callable[[], Environment], distance: DistanceFn, cap: int,
                 tie_breaks: int = 4, seed: int = 0, threshold: float = 0.5):
        if cap < 1 or tie_breaks < 0:
            raise ValueError(f"SolverTruth: cap = {cap} must be >= 1 and tie_breaks = "
                             f"{tie_breaks} >= 0.")
        self.make_env, self.distance, self.cap = make_env, distance, cap
        self.tie_breaks, self.seed, self.threshold = tie_breaks, seed, threshold

    def _d(self, env: Environment, task: Task, prefix: tuple[str, ...],
           observations: list[str]) -> tuple[float, int]:
        """``(d averaged over the tie-breaks, solver calls made)``: a first call that broke no
        tie gives every tie-break's ``d``, so the others are not played."""
        if not self.tie_breaks:
            return float(self.distance(env, task, prefix, self.cap, None, observations)), 1
        ds = []
        for s in range(self.tie_breaks):
            rng = TieBreaks(self.seed * 7919 + s)
            ds.append(self.distance(env, task, prefix, self.cap, rng, observations))
            if not rng.ties:
                return float(ds[0]), 1
        return float(np.mean(ds)), len(ds)

    def estimate(self, trajectories: Sequence[Trajectory],
                 rollouts: Sequence[int] | None = None) -> TruthEstimate:
        began = time.perf_counter()
        env = self.make_env()
        offsets = _offsets(trajectories)
        values = np.full(sum(len(t.steps) for t in trajectories), np.nan)
        cache: dict[tuple, float] = {}
        env_steps = solver_calls = 0
        for i in _chosen(trajectories, rollouts):
            traj = trajectories[i]
            sent, after = sent_actions(traj), recorded_observations(traj)
            # an invalid action changes nothing and teaches the solver nothing: it keys the same
            # state as the prefix without it
            prefix: list[str] = []
            seen: list[str] = []
            d = []
            for t in range(len(traj.steps) + 1):
                if t == len(traj.steps) and traj.won:
                    d.append(0.0)
                    break
                key = (traj.task.task_id, tuple(prefix))
                if key not in cache:
                    cache[key], calls = self._d(env, traj.task, key[1], seen)
                    env_steps += len(prefix) * calls
                    solver_calls += calls
                d.append(cache[key])
                if t < len(traj.steps) and traj.steps[t].valid:
                    prefix.append(sent[t])
                    seen.append(after[t])
            d_arr = np.asarray(d)
            values[offsets[i]:offsets[i] + len(traj.steps)] = d_arr[:-1] - d_arr[1:] - 1.0
        _close([env])
        return TruthEstimate(self.name, values, self.threshold, time.perf_counter() - began,
                             {"states": float(len(cache)), "replay_steps": float(env_steps),
                              "solver_calls": float(solver_calls)})


@dataclass
class _Slot:
    """One continuation in progress: a replayed state and its running history."""

    env: Environment
    task: Task
    history: list[tuple[str, str]]
    observation: str
    admissible: tuple[str, ...]
    budget: int


class MonteCarloTruth:
    """The current policy's advantage by Monte Carlo continuations (see the module docstring).

    Args:
        collector: the collector that made the rollouts: its policy, environments, prompts,
            decoding and step limit are the continuations' own.
        temperature: the rollouts' sampling temperature.
        continuations: ``K`` per state (even, for the split-half reliability).
        seed: seeds the continuations' sampling.
        threshold: ``θ`` in success probability (0.25: about one standard error at K = 8).
        chunk: continuations run at once (environment instances held); a finished one's place
            goes to the next.
    """

    name = "mc"

    def __init__(self, collector: RolloutCollector, temperature: float, continuations: int = 8,
                 seed: int = 0, threshold: float = 0.25, chunk: int = 64):
        if continuations < 2 or continuations % 2:
            raise ValueError(f"MonteCarloTruth: continuations = {continuations}; use an even "
                             "number >= 2 (the split-half reliability halves them).")
        self.collector, self.temperature, self.k = collector, temperature, continuations
        self.seed, self.threshold, self.chunk = seed, threshold, chunk
        self._envs: list[Environment] = []

    def _env(self, index: int) -> Environment:
        while len(self._envs) <= index:
            self._envs.append(self.collector.make_env())
        return self._envs[index]

    def _replay(self, slot_index: int, traj: Trajectory, t: int) -> _Slot:
        """A fresh continuation slot at step ``t`` of ``traj``, its replay checked."""
        env = self._env(slot_index)
        obs = env.reset(traj.task)
        after = recorded_observations(traj)
        for j, action in enumerate(sent_actions(traj)[:t]):
            obs, _, _, _ = env.step(action)
            if obs.text != after[j]:
                raise ReplayMismatch(traj.task.task_id, j, after[j], obs.text)
        history = [(s.observation, s.response.strip() if s.action is None else s.action)
                   for s in traj.steps[:t]]
        return _Slot(env, traj.task, history, obs.text, obs.admissible_actions,
                     self.collector.config.max_steps - t)

    def _play(self, jobs: Sequence[tuple[int, int]], trajectories: Sequence[Trajectory],
              starts: dict[int, tuple[int, int]], outcomes: np.ndarray,
              generator: torch.Generator) -> None:
        """Play every job ``(state, k)`` to its end (the collector's step loop, outcome only)
        and write ``outcomes[state, k]``. ``chunk`` continuations run at once; a finished
        one's slot takes the next job, so the batch stays full until the jobs run out."""
        cfg, policy = self.collector.config, self.collector.policy
        cache = PromptCache() if cfg.reuse_prompt_cache else None
        pending = list(reversed(jobs))
        slots: list[_Slot | None] = [None] * self.chunk
        owners: list[tuple[int, int] | None] = [None] * self.chunk
        while True:
            for n in range(self.chunk):
                if slots[n] is None and pending:
                    owners[n] = pending.pop()
                    rollout, t = starts[owners[n][0]]
                    slots[n] = self._replay(n, trajectories[rollout], t)
            active = [n for n in range(self.chunk) if slots[n] is not None]
            if not active:
                return
            playing = [slots[n] for n in active]
            prompts = [build_prompt_ids(policy.tokenizer, s.task.instruction, s.history,
                                        s.observation, s.admissible, cfg.prompt) for s in playing]
            tries = ([ActionTrie.from_commands(policy.tokenizer, s.admissible,
                                               cfg.prompt.action_format) for s in playing]
                     if cfg.decoding == "admissible" else None)
            generations = policy.generate(prompts, temperature=self.temperature,
                                          max_new_tokens=cfg.max_new_tokens, generator=generator,
                                          tries=tries, prompt_cache=cache)
            for n, s, gen in zip(active, playing, generations, strict=True):
                action = parse_action(gen.text, cfg.prompt.action_format)
                obs, _, done, info = s.env.step(gen.text if action is None else action)
                s.history.append((s.observation, gen.text.strip() if action is None else action))
                s.observation, s.admissible = obs.text, obs.admissible_actions
                s.budget -= 1
                if done or s.budget <= 0:
                    outcomes[owners[n]] = float(info.won)
                    slots[n] = owners[n] = None

    def estimate(self, trajectories: Sequence[Trajectory],
                 rollouts: Sequence[int] | None = None) -> TruthEstimate:
        began = time.perf_counter()
        chosen = _chosen(trajectories, rollouts)
        # the states: (task, prefix) keys; a rollout's last state is terminal, its value known
        keys: dict[tuple, int] = {}
        starts: dict[int, tuple[int, int]] = {}  # state to sample -> (rollout, step)
        known: dict[int, float] = {}  # terminal state -> 1[won]
        path: dict[int, list[int]] = {}  # rollout -> its states, s_0 .. s_T
        for i in chosen:
            traj = trajectories[i]
            sent = sent_actions(traj)
            for t in range(len(traj.steps) + 1):
                key = (traj.task.task_id, tuple(sent[:t]))
                if key not in keys:
                    keys[key] = len(keys)
                    if t < len(traj.steps):
                        starts[keys[key]] = (i, t)
                    else:
                        known[keys[key]] = float(traj.won)
                path.setdefault(i, []).append(keys[key])
        outcomes = np.zeros((len(keys), self.k))
        for state, won in known.items():
            outcomes[state] = won
        generator = torch.Generator().manual_seed(self.seed)
        jobs = [(state, k) for state in starts for k in range(self.k)]
        self._play(jobs, trajectories, starts, outcomes, generator)
        _close(self._envs)
        self._envs = []
        half = self.k // 2
        value = {"all": outcomes.mean(1), "a": outcomes[:, :half].mean(1),
                 "b": outcomes[:, half:].mean(1)}
        variance = value["all"] * (1 - value["all"]) / self.k  # binomial; 0 where known
        offsets = _offsets(trajectories)
        values = np.full(sum(len(t.steps) for t in trajectories), np.nan)
        halves: dict[str, list[float]] = {"a": [], "b": []}
        errors = []
        for i, states in path.items():
            now, later = np.asarray(states[:-1]), np.asarray(states[1:])
            values[offsets[i]:offsets[i] + now.size] = value["all"][later] - value["all"][now]
            for which, diffs in halves.items():
                diffs.extend(value[which][later] - value[which][now])
            errors.extend(np.sqrt(variance[now] + variance[later]))
        # split-half reliability: Spearman-Brown on the halves' correlation over steps
        r = pearson(np.asarray(halves["a"]), np.asarray(halves["b"]))
        split_half = 2 * r / (1 + r) if r > -1 else float("nan")
        return TruthEstimate(self.name, values, self.threshold, time.perf_counter() - began,
                             {"states": float(len(starts)), "continuations": float(len(jobs)),
                              "se_mean": float(np.mean(errors)) if errors else np.nan,
                              "split_half": split_half, "split_half_r": r})
