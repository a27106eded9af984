"""One training update, top to bottom: collect → score → credit → check and log → PPO → metrics.

``update_step(state, update)`` runs update ``update`` of the run ``state`` holds and returns
its ``metrics.jsonl`` record; ``train/loop.py`` builds the state and runs the updates with
evaluation and checkpoints around them. Each stage passes plain records to the next:

    train/dapo.py                     COLLECT: the groups, with DAPO's dynamic sampling when on
    train/ppo.py                      SCORE: the behaviour ``ℓ^b`` and reference ``ℓ_ref``
    train/credit_inputs.py            CREDIT: the credit batch with what the estimator declared
    credit/step.py                    SCORE: the step rows (``tensorize_steps``)
    credit/result.py                  CREDIT: ``CreditResult.per_token``, shared with verl's path
    train/evaluation/credit_check.py  with ``run.credit_check_every``, the credit against the
                                      solver truth
    train/ppo.py                      PPO: one epoch of the clipped-ratio update
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from agentcredit.config import TrainConfig
from agentcredit.credit.step import tensorize_steps
from agentcredit.envs.suites import EnvSuite
from agentcredit.jsonl_log import JsonlLog, finite_or_null
from agentcredit.rollout.collector import RolloutCollector
from agentcredit.run.directory import RandomStreams, RunDirectory
from agentcredit.run.live_metrics import LiveMetrics
from agentcredit.run.saved_rollouts import save_rollouts
from agentcredit.skills import SkillProvider
from agentcredit.train.credit_inputs import CreditInputs
from agentcredit.train.dapo import GroupSource, collect_with_signal
from agentcredit.train.evaluation.credit_check import step_credit, update_credit_check
from agentcredit.train.evaluation.evaluate import rollout_metrics
from agentcredit.train.ppo import PPOBatch, ppo_update, score_steps


@dataclass
class RunLogs:
    """What a run appends to: ``metrics.jsonl``, the live metrics and ``ledger.jsonl``."""

    metrics: JsonlLog
    live: LiveMetrics
    ledger: JsonlLog

    def log(self, record: dict) -> None:
        """One line of ``metrics.jsonl`` (non-finite values as null), and the live metrics."""
        self.metrics.append([finite_or_null(record)])
        self.live.log(record)

    def close(self) -> None:
        """Close the three logs."""
        self.metrics.close()
        self.ledger.close()
        self.live.close()


@dataclass
class TrainState:
    """Everything a run's updates read and change, built once by ``train.loop.setup``.

    Attributes:
        config: the run. run: its directory. suite: its environments.
        model: the policy being trained; tokenizer: its tokenizer.
        optimizer: AdamW over ``model``'s parameters.
        reference: the frozen reference policy, or ``None`` (no KL, no estimator reads it).
        streams: every random stream of the run (saved with each checkpoint).
        collector: plays rollouts with ``model`` (training and evaluation).
        groups: where each update's groups come from (the RL pool, ``streams``).
        returns: ``R_i`` as dynamic sampling judges it (``dapo.shaped_return``).
        estimator: the registered estimator; credit_options: its config.
        inputs: prepares the credit batch with what the estimator declared.
        provider: the privileged skill texts.
        valid: the evaluation splits' tasks; probes: the probe-gap set (may be empty).
        logs: the run's logs.
        success_start: the success of the evaluation before training, once known.
        start_update: the last update a resumed run had finished (0 for a new run).
        finished: the last update whose checkpoint step ran (for Ctrl-C's message).
        stepped: the last update whose optimiser steps ran (for a divergence's message).
    """

    config: TrainConfig
    run: RunDirectory
    suite: EnvSuite
    model: nn.Module
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    reference: nn.Module | None
    streams: RandomStreams
    collector: RolloutCollector
    groups: GroupSource
    returns: Callable
    estimator: Callable
    credit_options: Any
    inputs: CreditInputs
    provider: SkillProvider
    valid: dict
    probes: list
    logs: RunLogs
    success_start: float | None
    start_update: int
    finished: int
    stepped: int


def update_step(state: TrainState, update: int) -> dict[str, Any]:
    """Run update ``update`` (1-based) on ``state``; its ``kind: update`` metrics record."""
    config, model, times = state.config, state.model, {}
    temperature = config.rollout.policy_temperature
    # COLLECT: DAPO's dynamic sampling collects again while groups lack signal
    with _timed(times, "rollout"):
        sampled = collect_with_signal(state.groups, update, state.returns)
        trajectories = sampled.trajectories
    # SCORE
    with _timed(times, "score"):
        steps = tensorize_steps(trajectories, state.tokenizer.pad_token_id)
        model.eval()
        score = config.optim.score_micro_batch_size
        layout = config.optim.layout
        old = (score_steps(model, steps, score, temperature, layout)
               if config.optim.recompute_old_logprobs else steps.sampling_logprobs)
        ref = (score_steps(state.reference, steps, score, temperature, layout)
               if state.reference is not None else None)
    # |ℓ^b − log-prob at sampling|: ~0, since the sampler and the scorer apply the same
    # temperature; a larger value flags a scorer that differs from the sampler.
    sampling_gap = ({"score/sampling_gap": float(
        (old - steps.sampling_logprobs)[steps.loss_mask].abs().mean())}
        if config.optim.recompute_old_logprobs else {})
    # CREDIT
    prepared = state.inputs.prepare(model, trajectories, steps, old, ref, update)
    times.update(prepared.seconds)
    with _timed(times, "credit"):
        credit = state.estimator(prepared.batch, state.credit_options)
        advantages = credit.per_token(steps.loss_mask)  # [S, L]
    # CHECK, LEDGER, SAVED ROLLOUTS
    checked, truth, every = {}, None, config.run.credit_check_every
    if every and update % every == 0:
        with _timed(times, "credit_check"):
            checked, truth = update_credit_check(config, state.suite.make_env, trajectories,
                                                 step_credit(credit, steps.loss_mask),
                                                 config.run.seed + update)
    state.logs.ledger.append(credit.ledger_rows, update=update)
    every = config.run.save_rollouts
    if every and (update == config.run.updates or update % every == 0):
        with _timed(times, "save_rollouts"):
            save_rollouts(state.run.rollouts, update, config.credit.estimator, trajectories,
                          prepared.batch, credit, state.tokenizer, keep=config.run.keep_rollouts,
                          truth=truth)
    # PPO
    with _timed(times, "update"):
        model.train()
        stats = ppo_update(model, state.optimizer,
                           PPOBatch(steps, old, advantages, ref, prepared.teacher),
                           config.optim, state.streams.sampling, temperature=temperature)
        state.stepped = update
        model.eval()
    # METRICS
    return {"kind": "update", "update": update,
            **rollout_metrics(trajectories), **stats, **prepared.metrics,
            **(sampled.metrics() if config.rollout.dynamic_sampling_rounds else {}),
            **{f"credit/{key}": value for key, value in credit.diagnostics.items()},
            **checked,
            "advantage/mean_abs": float(credit.step_advantages.abs().mean()),
            **sampling_gap,
            "tokens/generated_per_s": sum(len(s.response_ids) for t in trajectories
                                          for s in t.steps) / times["rollout"],
            "tokens/trained_per_s": steps.num_response_tokens / times["update"],
            **{f"time/{phase}": seconds for phase, seconds in times.items()}}


@contextlib.contextmanager
def _timed(times: dict[str, float], phase: str) -> Iterator[None]:
    """Record the wall seconds of the block as ``times[phase]``."""
    began = time.perf_counter()
    yield
    times[phase] = time.perf_counter() - began
