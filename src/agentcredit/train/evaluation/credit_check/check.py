"""Credit check: every method's step credit on one batch against the truths (docs/credit_check.md).

``run_credit_check`` collects ``groups`` task groups the way the trainer does (the run's
collector, rollout temperature, group size), computes every method's advantages on that *same*
batch (each with the inputs it declares: traces, teacher scores, hindsight), estimates the
truths by replaying the rollouts (``truths``) and scores each method
against each truth (``metrics``), with paired differences against the method's backbone
and against VICT's ``random_edges`` control. ``agentcredit credit-check`` and
``benchmarks/credit_accuracy.py`` call it.

Methods are written ``NAME[/BACKBONE]``: ``vict/gigpo`` is VICT on GiGPO, ``salt/rloo`` SALT on
RLOO, ``grpo`` plain GRPO.

Before anything is collected, the methods and truths are matched to what the environment can
serve (``serve_truths``, ``serve_methods``): a method that reads skill texts (a teacher, ADRS)
needs them for every task of the split, the solver truth (and the token truth) needs the
environment's solver. Left to the defaults, the check leaves out what cannot run, with one
line saying why and what to set; asked for by name, it refuses at once, naming the setting.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from agentcredit.config import ConfigError, TrainConfig, estimator_config, load_config
from agentcredit.config.checks import GIB, machine_memory, rollout_bytes
from agentcredit.credit import CreditResult, get_estimator
from agentcredit.envs.base import Task
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.rollout.records import Trajectory
from agentcredit.skills import SkillNotFoundError, SkillProvider
from agentcredit.train.build import load_model, make_collector
from agentcredit.train.credit_inputs import CreditInputs
from agentcredit.train.evaluation.credit_check.metrics import (
    METRICS,
    RANDOM_ROW,
    AccuracyTable,
    StepLayout,
    accuracy_table,
)
from agentcredit.train.evaluation.credit_check.token_truth import (
    TokenTruth,
    chosen_steps,
    token_credit,
    token_within,
)
from agentcredit.train.evaluation.credit_check.truths import (
    MonteCarloTruth,
    SolverTruth,
    TruthEstimate,
    solver_for,
    solver_refusal,
)
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.scoring.passes import scoring_passes
from agentcredit.train.step_tensors import tensorize_steps
from agentcredit.train.warm_start.skill_texts import check_skill_texts

#: every estimator that runs on a collected batch: the backbones, VICT on each, VICT's six
#: controls (on GRPO), the fine-grained baselines and ADRS.
DEFAULT_METHODS = ("grpo", "rloo", "gigpo", "vict", "vict/rloo", "vict/gigpo",
                   "dense_atom_reward", "commit_only", "temporal_nearest", "random_edges",
                   "no_core", "no_proof_edges", "salt", "hcapo", "proxmo", "adrs")
#: the control every method is also compared with (edges permuted: same atoms, random steps).
CONTROL = "random_edges"
TRUTHS = ("solver", "mc")


def method_settings(method: str) -> list[str]:
    """``NAME[/BACKBONE]`` -> the dotted settings of that method (``method=NAME`` and
    ``credit.options.backbone=BACKBONE``)."""
    name, _, backbone = method.partition("/")
    if not name or "/" in backbone:
        raise ValueError(f"method {method!r}: write NAME or NAME/BACKBONE (vict/gigpo)")
    return [f"method={name}"] + ([f"credit.options.backbone={backbone}"] if backbone else [])


def method_configs(config_path: str | Path | None, overrides: Sequence[str],
                   methods: Sequence[str]) -> dict[str, TrainConfig]:
    """Each method's config: the run's config (``config_path``) without its ``credit.options``,
    then ``overrides``, then the method's settings (``method_settings``). The run's options
    belong to the run's estimator (GiGPO's ``mode``), and another method's config refuses them."""
    return {m: load_config(config_path, ["credit.options={}", *overrides, *method_settings(m)])
            for m in methods}


def backbone_of(config: TrainConfig) -> str | None:
    """The backbone a method's estimator corrects (``None`` for a backbone, or none declared)."""
    backbone = getattr(estimator_config(config.credit), "backbone", None)
    return None if backbone is None else backbone.config_name


OPTION_RANGES = {"groups": (1, 10_000), "mc_groups": (0, 10_000), "continuations": (2, 1_000),
                 "tie_breaks": (0, 1_000), "boots": (1, 1_000_000), "token_steps": (0, 10_000)}
"""Each size's allowed range (inclusive): past these a check runs for days or fills memory."""
BOOTSTRAP_BYTES = 1 << 30
"""The most memory the bootstrap's draws may take (``boots`` x ``groups`` x 8 bytes)."""
MC_JOB_BYTES = 72
"""Memory of one Monte Carlo continuation waiting to be played: its 8-byte outcome and its
queued ``(state, k)`` job (a tuple and its list slot)."""


@dataclass
class CreditCheckOptions:
    """What ``run_credit_check`` measures.

    Attributes:
        methods: ``NAME[/BACKBONE]`` specs, each refused before collecting when the environment
            cannot serve it; ``None``: the ``DEFAULT_METHODS`` it can serve.
        groups: task groups collected (each ``rollout.group_size`` rollouts).
        truths: which truths to estimate (``solver``, ``mc``), refused as ``methods`` are;
            ``None``: the ``TRUTHS`` the environment can serve.
        mc_groups: groups (the first ones) the Monte Carlo truth covers; 0: all.
        continuations: ``K`` continuations per state for the Monte Carlo truth.
        tie_breaks: random tie-breaks the solver's distance is averaged over.
        boots: bootstrap draws of groups for the intervals.
        seed: seeds the task draw, the rollouts, the continuations and the bootstrap.
        split: the task split the groups are drawn from.
        token_steps: steps (the first ones with 3 or more response tokens) the token-level
            truth covers, with ``continuations`` re-decodes per token prefix; 0: off.
        workers: 2 runs the solver truth in a second process beside the Monte Carlo truth
            (one torch thread each), so the two truths take the longer one's time, not the
            sum; 1 runs them one after the other.
    """

    methods: Sequence[str] | None = None
    groups: int = 16
    truths: Sequence[str] | None = None
    mc_groups: int = 4
    continuations: int = 8
    tie_breaks: int = 4
    boots: int = 1000
    seed: int = 0
    split: str = "train"
    token_steps: int = 0
    workers: int = 1

    def __post_init__(self) -> None:
        unknown = [t for t in self.truths or () if t not in TRUTHS]
        if unknown:
            raise ValueError(f"truth {unknown[0]!r} is unknown; choose from {', '.join(TRUTHS)}")
        for name, (low, high) in OPTION_RANGES.items():
            if not low <= getattr(self, name) <= high:
                raise ValueError(f"credit check: {name} = {getattr(self, name)}; it must be "
                                 f"from {low} to {high:,}")
        draws = self.boots * self.groups * 8  # the bootstrap's [boots, groups] float64 indices
        if draws > BOOTSTRAP_BYTES:
            raise ValueError(f"credit check: boots = {self.boots} draws of {self.groups} groups "
                             f"need {draws / 2**30:.1f} GiB, more than the "
                             f"{BOOTSTRAP_BYTES >> 30} GiB allowed; lower boots or groups")
        if not 1 <= self.workers <= 2:
            raise ValueError(f"credit check: workers = {self.workers}; it must be 1 or 2 (the "
                             "two truths use at most 2: the solver beside the Monte Carlo truth)")


@dataclass
class CreditCheckResult:
    """What a credit check measured.

    Attributes:
        table: every method against every truth (``metrics.AccuracyTable``).
        truths: the truths' estimates (values, cost, standard error, reliability).
        steps: steps in the batch; ``groups``: task groups; ``rollouts``: rollouts.
        seconds: wall time per phase (``collect``, ``credit``, one per truth).
        method_seconds: each method's credit time (its inputs' preparation included).
        token_within: with ``token_steps``, each method's within-step Spearman ρ of its token
            credit and the token-level truth with its interval, the ``random`` row and the
            steps covered (``token_truth.token_within``).
    """

    table: AccuracyTable
    truths: dict[str, TruthEstimate]
    steps: int
    groups: int
    rollouts: int
    success: float
    seconds: dict[str, float] = field(default_factory=dict)
    method_seconds: dict[str, float] = field(default_factory=dict)
    token_within: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain JSON-ready data; a truth's cost is ``{truth}_s_per_100_steps``."""
        return {
            "steps": self.steps, "groups": self.groups, "rollouts": self.rollouts,
            "rollout_success": self.success,
            **{f"{name}_s_per_100_steps": t.seconds_per_100_steps
               for name, t in self.truths.items()},
            "truth_stats": {name: {"steps": t.steps, "seconds": t.seconds, **t.stats}
                            for name, t in self.truths.items()},
            "seconds": self.seconds, "method_seconds": self.method_seconds,
            **({"token_within": self.token_within} if self.token_within else {}),
            **self.table.to_dict()}


def method_pairs(methods: Sequence[str], backbones: dict[str, str | None]
                 ) -> list[tuple[str, str]]:
    """Each method against its backbone and against ``CONTROL``, where those were run."""
    pairs = []
    for method in methods:
        base = backbones.get(method)
        if base is not None and base != method and base in methods:
            pairs.append((method, base))
        if method != CONTROL and CONTROL in methods:
            pairs.append((method, CONTROL))
    return pairs


def truth_refusal(truth: str, config: TrainConfig) -> str | None:
    """Why ``config``'s environment cannot serve ``truth`` (``None`` when it can): the solver
    truth needs the environment's solver under its options; Monte Carlo needs nothing more."""
    if truth != "solver":
        return None
    try:
        return solver_refusal(config.env.name, config.env.options)
    except KeyError as err:
        return err.args[0]


def skills_refusal(config: TrainConfig, provider: SkillProvider, tasks: Sequence[Task]
                   ) -> str | None:
    """Why a method reading skill texts cannot run on ``tasks`` (``None`` when every task has
    its text), ending with what to set. Without ``skills.root`` the texts are agentcredit's
    own, which no user should edit: the reason then names the setting, not their folder."""
    try:
        check_skill_texts(provider, tasks)
    except SkillNotFoundError as err:
        if config.skills.root:
            return f"skills.root = {config.skills.root!r}: {err}"
        env = config.env.name
        types = ", ".join(sorted({t.task_type for t in tasks if t.env == env}))
        return (f"environment {env!r} has no skill texts among agentcredit's own; set "
                f"skills.root=DIR to a folder holding {env}/guide.md and one "
                f"{env}/<task_type>.md per task type ({types})")
    return None


def serve_truths(options: CreditCheckOptions, config: TrainConfig,
                 echo: Callable[[str], None]) -> tuple[str, ...]:
    """The truths to estimate: those asked for (each refused with a ``ConfigError`` that the
    environment cannot serve), else the ``TRUTHS`` it can, with one line per one left out.
    The token truth plays the solver too, so ``token_steps`` needs it."""
    if options.token_steps:
        reason = truth_refusal("solver", config)
        if reason is not None:
            raise ConfigError(f"credit check: token_steps = {options.token_steps}: the token "
                              f"truth plays the solver, and {reason}; set --token-steps 0")
    served = []
    for truth in TRUTHS if options.truths is None else options.truths:
        reason = truth_refusal(truth, config)
        if reason is None:
            served.append(truth)
        elif options.truths is not None:
            raise ConfigError(f"credit check: truth {truth!r}: {reason}; or leave it out of "
                              "--truths")
        else:
            echo(f"left out the {truth} truth: {reason}")
    return tuple(served)


def serve_methods(options: CreditCheckOptions, configs: dict[str, TrainConfig],
                  provider: SkillProvider, tasks: Sequence[Task],
                  echo: Callable[[str], None]) -> dict[str, TrainConfig]:
    """``configs`` of the methods the environment can serve on ``tasks`` (the split's, so the
    answer does not hang on the draw): a method whose inputs need skill texts
    (``TrainConfig.uses_teacher``) runs only where every task has one. A method asked for by
    name that cannot run is a ``ConfigError``; a default one is left out, in one line for all
    the methods left out for the same reason."""
    served: dict[str, TrainConfig] = {}
    left_out: dict[str, list[str]] = {}
    for method, config in configs.items():
        reason = skills_refusal(config, provider, tasks) if config.uses_teacher else None
        if reason is None:
            served[method] = config
        elif options.methods is not None:
            raise ConfigError(f"credit check: method {method!r} reads skill texts (its "
                              f"teacher): {reason}; or leave it out of --methods")
        else:
            left_out.setdefault(reason, []).append(method)
    for reason, methods in left_out.items():
        echo(f"left out {', '.join(methods)} (reads skill texts): {reason}")
    return served


def step_credit(result: CreditResult, loss_mask: torch.Tensor) -> np.ndarray:
    """``[S]`` a method's step credit: its step advantages, or for a method that credits tokens
    (ADRS) the mean of its token advantages over each step's response."""
    if result.token_advantages is None:
        return result.step_advantages.detach().double().numpy()
    rows = result.per_token(loss_mask)  # [S, L]
    return (rows.sum(1) / loss_mask.sum(1).clamp(min=1)).double().numpy()


def step_layout(trajectories: Sequence[Trajectory]) -> StepLayout:
    """The batch's layout; a group has signal when its outcomes differ (invalid-action
    penalties aside)."""
    return StepLayout.from_lists([t.group_id for t in trajectories],
                                 [len(t.steps) for t in trajectories],
                                 [t.outcome_reward for t in trajectories])


def require_solver(config: TrainConfig) -> None:
    """Refuse ``run.credit_check_every`` on an environment without a solver truth, or with
    options under which it has none (FlashRAG questions)."""
    if config.run.credit_check_every:
        try:
            reason = solver_refusal(config.env.name, config.env.options)
        except KeyError as err:
            reason = err.args[0]
        if reason is not None:
            raise ConfigError(f"run.credit_check_every = {config.run.credit_check_every}: "
                              f"{reason}; set run.credit_check_every=0")


def update_credit_check(config: TrainConfig, make_env: Callable,
                        trajectories: Sequence[Trajectory], step_advantages: np.ndarray,
                        seed: int) -> tuple[dict[str, float], np.ndarray]:
    """``(credit_check/* metrics, [S] solver truth g_t)`` of one training update: the
    estimator's step credit against the solver truth (one seeded tie-break, 200 bootstrap
    draws), the random row's pooled ρ beside it; the truth is saved beside the credit when the
    update's rollouts are saved."""
    truth = SolverTruth(make_env, solver_for(config.env.name), cap=config.rollout.max_steps,
                        tie_breaks=1, seed=seed).estimate(trajectories)
    name = config.credit.estimator
    table = accuracy_table({name: step_advantages}, {"solver": truth.truth_values()},
                           step_layout(trajectories), boots=200, seed=seed)
    metrics = {}
    for metric in METRICS:
        value = table.value(name, "solver", metric)
        metrics[f"credit_check/solver/{metric}"] = float("nan") if value is None else value
    chance = table.value(RANDOM_ROW, "solver", "pooled")
    metrics["credit_check/solver/pooled_random"] = float("nan") if chance is None else chance
    metrics["credit_check/solver_s_per_100_steps"] = truth.seconds_per_100_steps
    return metrics, truth.values


def _solver_context() -> multiprocessing.context.BaseContext:
    """How the solver's second process starts: forked where the platform can (it inherits the
    batch, the suite and any solver registered at run time, and runs no torch), else spawned
    (the suite and solver are then pickled by reference and must be importable)."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _with_interval(row: dict) -> str:
    """``+0.120 [-0.05,+0.30]``, or ``-`` for a value not measured."""
    if row["value"] is None:
        return "-"
    return f"{row['value']:+.3f} [{row['low']:+.2f},{row['high']:+.2f}]"


def estimate_truths(options: CreditCheckOptions, base: TrainConfig, suite,
                    collector: RolloutCollector,
                    trajectories: Sequence[Trajectory], echo: Callable[[str], None]
                    ) -> dict[str, TruthEstimate]:
    """The truths ``options`` asks for on the batch, in ``TRUTHS`` order; with ``workers = 2``
    the solver runs in a second process while Monte Carlo runs in this one."""
    truths: dict[str, TruthEstimate] = {}
    solver = (SolverTruth(suite.make_env, solver_for(base.env.name), cap=base.rollout.max_steps,
                          tie_breaks=options.tie_breaks, seed=options.seed)
              if "solver" in options.truths else None)
    beside = solver is not None and "mc" in options.truths and options.workers == 2
    with contextlib.ExitStack() as stack:
        pending = None
        if beside:
            pool = stack.enter_context(ProcessPoolExecutor(1, mp_context=_solver_context()))
            pending = pool.submit(solver.estimate, trajectories)
            stack.callback(torch.set_num_threads, torch.get_num_threads())
            torch.set_num_threads(1)
        elif solver is not None:
            truths["solver"] = solver.estimate(trajectories)
            echo(f"solver truth: {truths['solver'].steps} steps "
                 f"({truths['solver'].seconds:.0f} s)")
        if "mc" in options.truths:
            covered = options.mc_groups or options.groups
            rollouts = [i for i, t in enumerate(trajectories)
                        if t.group_id < trajectories[0].group_id + covered]
            mc = MonteCarloTruth(collector, base.rollout.temperature,
                                 continuations=options.continuations, seed=options.seed)
            truths["mc"] = mc.estimate(trajectories, rollouts)
            echo(f"Monte Carlo truth: {truths['mc'].steps} steps, K = {options.continuations} "
                 f"({truths['mc'].seconds:.0f} s)")
        if pending is not None:
            truths["solver"] = pending.result()
            echo(f"solver truth, beside it: {truths['solver'].steps} steps "
                 f"({truths['solver'].seconds:.0f} s)")
    return {name: truths[name] for name in TRUTHS if name in truths}


def memory_estimate(options: CreditCheckOptions, config: TrainConfig) -> dict[str, float]:
    """Bytes the check's batch holds at once, by part: ``rollouts`` (``groups`` task groups,
    counted as ``config.checks.rollout_bytes`` counts a training update's) and ``mc`` (a
    ``MC_JOB_BYTES`` continuation for each of ``continuations`` per state of the groups the
    Monte Carlo truth covers, at most ``rollout.group_size`` x ``rollout.max_steps`` states a
    group). Within ``OPTION_RANGES`` either can pass any machine's memory (10,000 groups of the
    default rollouts: 111 GiB), so it is checked before anything is collected."""
    rollout = config.rollout
    covered = min(options.mc_groups or options.groups, options.groups)
    truths = TRUTHS if options.truths is None else options.truths  # mc is always served
    states = covered * rollout.group_size * rollout.max_steps if "mc" in truths else 0
    return {"rollouts": rollout_bytes(config, options.groups),
            "mc": float(states) * options.continuations * MC_JOB_BYTES}


def check_memory(options: CreditCheckOptions, config: TrainConfig,
                 available: int | None = None) -> None:
    """Refuse a check whose ``memory_estimate`` is over ``available`` bytes (this machine's
    memory when None), in one line naming the flag that sizes its larger part."""
    available = machine_memory() if available is None else available
    estimate = memory_estimate(options, config)
    total = sum(estimate.values())
    if available is None or total <= available:
        return
    if estimate["rollouts"] >= estimate["mc"]:
        fix = f"lower --groups {options.groups}"
    else:
        fix = (f"lower --continuations {options.continuations} or --mc-groups "
               f"{options.mc_groups} (the groups the Monte Carlo truth covers; 0: all)")
    raise ConfigError(f"credit check: {options.groups} groups need about {total / GIB:,.1f} GiB "
                      f"of memory (rollouts {estimate['rollouts'] / GIB:,.1f}, Monte Carlo "
                      f"{estimate['mc'] / GIB:,.1f} GiB) and this machine has "
                      f"{available / GIB:,.1f} GiB; {fix} (or rollout.group_size, "
                      "rollout.max_steps)")


def run_credit_check(config_path: str | Path | None, overrides: Sequence[str],
                     model_dir: str | Path, options: CreditCheckOptions,
                     echo: Callable[[str], None] = print) -> CreditCheckResult:
    """Collect a batch with the model in ``model_dir`` under the config (``config_path`` plus
    ``overrides``), score every method of ``options`` against the truths; see the module
    docstring."""
    configs = method_configs(config_path, overrides, options.methods or DEFAULT_METHODS)
    base = load_config(config_path, list(overrides))
    options = replace(options, truths=serve_truths(options, base, echo))
    check_memory(options, base)
    if base.run.threads:
        torch.set_num_threads(base.run.threads)
    suite = base.env.build_suite()
    tasks, chosen = _chosen_tasks(options, base, suite)
    provider = SkillProvider(base.skills.root or None)
    configs = serve_methods(options, configs, provider, tasks, echo)
    model, tokenizer = load_model(base, model_dir)
    model.eval()
    collector = make_collector(base, model, tokenizer, suite)
    seconds: dict[str, float] = {}
    began = time.perf_counter()
    trajectories = collector.collect(chosen, base.rollout.group_size,
                                     temperature=base.rollout.temperature,
                                     generator=torch.Generator().manual_seed(options.seed))
    seconds["collect"] = time.perf_counter() - began
    echo(f"collected {len(chosen)} groups, {len(trajectories)} rollouts, "
         f"{sum(len(t.steps) for t in trajectories)} steps ({seconds['collect']:.0f} s)")

    # CREDIT: every method on the same batch; inputs prepared once per set of needs
    began = time.perf_counter()
    token_steps = chosen_steps(trajectories, options.token_steps)
    advantages, tokens, method_seconds = _method_credit(
        base, configs, model, tokenizer, suite, provider, trajectories, token_steps)
    seconds["credit"] = time.perf_counter() - began
    echo(f"credit of {len(configs)} methods ({seconds['credit']:.0f} s)")

    truths = estimate_truths(options, base, suite, collector, trajectories, echo)
    for name, truth in truths.items():
        seconds[name] = truth.seconds
    within_tokens: dict = {}
    if token_steps:
        began = time.perf_counter()
        tau = TokenTruth(collector, solver_for(base.env.name), base.rollout.max_steps,
                         base.rollout.temperature, options.continuations, options.seed
                         ).estimate(trajectories, token_steps)
        within_tokens = token_within(tokens, tau, options.seed, options.boots)
        seconds["token"] = time.perf_counter() - began
        echo(f"token truth: {len(tau)} steps ({within_tokens['scored_steps']} with a "
             f"non-constant τ), K = {options.continuations} ({seconds['token']:.0f} s); "
             "within-step ρ of token credit: " + ", ".join(
                 f"{m} {_with_interval(r)}" for m, r in within_tokens["methods"].items()))

    layout = step_layout(trajectories)
    pairs = method_pairs(list(configs), {m: backbone_of(c) for m, c in configs.items()})
    table = accuracy_table(advantages, {n: t.truth_values() for n, t in truths.items()}, layout,
                           pairs, boots=options.boots, seed=options.seed)
    return CreditCheckResult(table, truths, layout.num_steps, layout.num_groups,
                             len(trajectories), float(np.mean([t.won for t in trajectories])),
                             seconds, method_seconds, within_tokens)


def _chosen_tasks(options: CreditCheckOptions, base: TrainConfig, suite
                  ) -> tuple[list[Task], list[Task]]:
    """The ``options.split`` tasks of ``suite`` and the ``options.groups`` drawn from them
    (seeded by ``options.seed``; without replacement when there are enough)."""
    tasks = suite.tasks(options.split)
    if not tasks:
        raise ValueError(f"environment {base.env.name!r} has no {options.split!r} tasks")
    rng = random.Random(options.seed)
    chosen = (rng.sample(tasks, options.groups) if options.groups <= len(tasks)
              else rng.choices(tasks, k=options.groups))
    return tasks, chosen


def _method_credit(base: TrainConfig, configs: dict[str, TrainConfig], model, tokenizer, suite,
                   provider: SkillProvider, trajectories: Sequence[Trajectory],
                   token_steps: Sequence[tuple[int, int]]
                   ) -> tuple[dict[str, np.ndarray], dict[str, dict], dict[str, float]]:
    """Every method's credit on the one collected batch: per method its ``[S]`` step
    advantages, its per-token credit of ``token_steps`` (``token_credit``) and its seconds.
    Inputs are prepared once per set of needs, with the policy as its own reference."""
    steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
    temperature = base.rollout.policy_temperature
    old = (score_steps(model, steps, base.optim.score_micro_batch_size, temperature,
                       base.optim.layout)
           if "behaviour" in scoring_passes(base) else steps.sampling_logprobs)
    prepared: dict[frozenset, object] = {}
    advantages: dict[str, np.ndarray] = {}
    tokens: dict[str, dict] = {}
    method_seconds: dict[str, float] = {}
    for method, config in configs.items():
        started = time.perf_counter()
        needs = config.inputs
        if needs not in prepared:
            # the policy is its own reference: the check scores one fixed policy
            prepared[needs] = CreditInputs(config, suite, tokenizer, provider).prepare(
                model, trajectories, steps, old, old if "reference" in needs else None, 1).batch
        result = get_estimator(config.credit.estimator)(prepared[needs],
                                                        estimator_config(config.credit))
        advantages[method] = step_credit(result, steps.loss_mask)
        if token_steps:
            tokens[method] = token_credit(trajectories, result.per_token(steps.loss_mask),
                                          steps.loss_mask, token_steps)
        method_seconds[method] = time.perf_counter() - started
    return advantages, tokens, method_seconds
