"""One training update, top to bottom: collect → score → credit → PPO → metrics. It computes;
``train/loop.py`` writes what it leaves (the ledger, the credit check, saved rollouts).

``update_step(learner, context, update)`` runs update ``update`` on the ``Learner`` (what an
update changes: the policy, its optimiser, its random streams, the updates stepped) with the
``RunContext`` (what it only reads: the config, the scoring passes, the batch source, the
scorers, the estimator), and returns its ``metrics.jsonl`` record and its
``UpdateArtifacts``. Which scoring passes run is decided once per run
(``context.passes``, ``train/scoring/passes.py``: ``behaviour``, ``reference``, ``teacher``,
``hindsight``, ``traces``, each with its reason). Each stage passes plain records to the next,
in this order:

    train/batch_source.py             COLLECT: the groups, with DAPO's dynamic sampling when on
    train/step_tensors.py             SCORE: the step rows (``tensorize_steps``)
    train/scoring/behaviour_pass.py   SCORE: the ``behaviour`` ``ℓ^b`` and ``reference`` ``ℓ_ref``
    train/credit_inputs.py            CREDIT: the ``teacher``, ``hindsight``, ``traces`` passes
    credit/result.py                  CREDIT: ``CreditResult.per_token``, shared with verl's path
    train/ppo.py                      PPO: one epoch of the clipped-ratio update
    train/rollout_metrics.py          METRICS: the rollouts' reward, success, invalid rate
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from agentcredit.config import TrainConfig
from agentcredit.credit import CreditBatch, CreditResult
from agentcredit.rollout.records import Trajectory
from agentcredit.run.random_streams import RandomStreams
from agentcredit.train.batch_source import GroupSource, collect_with_signal
from agentcredit.train.credit_inputs import CreditInputs
from agentcredit.train.ppo import PPOBatch, ppo_update
from agentcredit.train.prefix_tree import uses_trees
from agentcredit.train.rollout_metrics import rollout_metrics
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.step_tensors import tensorize_steps


@dataclass
class Learner:
    """What the updates change.

    Attributes:
        model: the policy being trained.
        optimizer: AdamW over ``model``'s parameters.
        streams: every random stream of the run (saved with each checkpoint).
        stepped: the last update whose optimiser steps ran (for a divergence's message).
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    streams: RandomStreams
    stepped: int


@dataclass(frozen=True)
class RunContext:
    """What the updates read and never change.

    Attributes:
        config: the run.
        passes: the scoring passes each update makes (``scoring_passes(config)``).
        tokenizer: the policy's tokenizer.
        reference: the frozen reference policy, loaded exactly when ``passes`` holds
            ``reference``, else ``None``.
        batches: where each update's groups come from (its collector plays evaluation too).
        estimator: the registered estimator; credit_options: its config.
        inputs: runs the ``teacher``, ``hindsight`` and ``traces`` passes and prepares the
            credit batch.

    Raises:
        ValueError: ``reference`` is loaded without the ``reference`` pass, or missing with it.
    """

    config: TrainConfig
    passes: frozenset[str]
    tokenizer: Any
    reference: nn.Module | None
    batches: GroupSource
    estimator: Callable
    credit_options: Any
    inputs: CreditInputs

    def __post_init__(self) -> None:
        if ("reference" in self.passes) != (self.reference is not None):
            held = "no reference model" if self.reference is None else "a reference model"
            raise ValueError(f"RunContext has {held} but passes = {sorted(self.passes)}: load "
                             "the reference exactly when the passes hold 'reference' "
                             "(scoring_passes)")


@dataclass(frozen=True)
class UpdateArtifacts:
    """What an update leaves for the loop to write.

    Attributes:
        trajectories: the update's rollouts, in batch order.
        batch: their credit batch, as the estimator read it.
        credit: the estimator's result on ``batch`` (its ``ledger_rows`` go to ``ledger.jsonl``).
        loss_mask: ``[S, L]`` the response tokens of each step row.
    """

    trajectories: list[Trajectory]
    batch: CreditBatch
    credit: CreditResult
    loss_mask: Tensor


def update_step(learner: Learner, context: RunContext, update: int
                ) -> tuple[dict[str, Any], UpdateArtifacts]:
    """Run update ``update`` (1-based): its ``kind: update`` metrics record and what it leaves
    for the loop to write. It changes ``learner`` and nothing else: no file is written."""
    config, model, times = context.config, learner.model, {}
    passes = context.passes  # which scoring passes run, and why: train/scoring/passes.py
    temperature = config.rollout.policy_temperature
    # COLLECT: DAPO's dynamic sampling collects again while groups lack signal
    with _timed(times, "rollout"):
        sampled = collect_with_signal(context.batches, update, learner.streams)
        trajectories = sampled.trajectories
    # SCORE: "behaviour" (ℓ^b again, else the log-probs recorded at sampling) and "reference"
    # (ℓ_ref, for the KL term or an estimator that reads it)
    with _timed(times, "score"):
        steps = tensorize_steps(trajectories, context.tokenizer.pad_token_id)
        model.eval()
        score = config.optim.score_micro_batch_size
        layout = config.optim.layout
        old = (score_steps(model, steps, score, temperature, layout)
               if "behaviour" in passes else steps.sampling_logprobs)
        ref = (score_steps(context.reference, steps, score, temperature, layout)
               if "reference" in passes else None)
    # |ℓ^b − log-prob at sampling|: ~0, since the sampler and the scorer apply the same
    # temperature; a larger value flags a scorer that differs from the sampler.
    sampling_gap = ({"score/sampling_gap": float(
        (old - steps.sampling_logprobs)[steps.loss_mask].abs().mean())}
        if "behaviour" in passes else {})
    # CREDIT: the "teacher", "hindsight" and "traces" passes among ``passes``, then the estimator
    prepared = context.inputs.prepare(model, trajectories, steps, old, ref, update)
    times.update(prepared.seconds)
    with _timed(times, "credit"):
        credit = context.estimator(prepared.batch, context.credit_options)
        advantages = credit.per_token(steps.loss_mask)  # [S, L]
    # PPO
    with _timed(times, "update"), _training(model):
        stats = ppo_update(model, learner.optimizer,
                           PPOBatch(steps, old, advantages, ref, prepared.teacher),
                           config.optim, learner.streams.shuffling, temperature=temperature)
        learner.stepped = update
    # METRICS
    metrics = {"kind": "update", "update": update,
               **rollout_metrics(trajectories), **stats, **prepared.metrics,
               **(sampled.metrics() if config.rollout.dynamic_sampling_rounds else {}),
               **{f"credit/{key}": value for key, value in credit.diagnostics.items()},
               "advantage/mean_abs": float(credit.step_advantages.abs().mean()),
               **sampling_gap,
               "score/trees": float(uses_trees(model, config.optim.layout)),
               "tokens/generated_per_s": sum(len(s.response_ids) for t in trajectories
                                             for s in t.steps) / times["rollout"],
               "tokens/trained_per_s": steps.num_response_tokens / times["update"],
               **{f"time/{phase}": seconds for phase, seconds in times.items()}}
    return metrics, UpdateArtifacts(trajectories, prepared.batch, credit, steps.loss_mask)


@contextlib.contextmanager
def _training(model: nn.Module) -> Iterator[None]:
    """``model`` in training mode for the block, in evaluation mode after it (where the
    scoring passes and the rollouts of the next update want it)."""
    model.train()
    try:
        yield
    finally:
        model.eval()


@contextlib.contextmanager
def _timed(times: dict[str, float], phase: str) -> Iterator[None]:
    """Record the wall seconds of the block as ``times[phase]``."""
    began = time.perf_counter()
    yield
    times[phase] = time.perf_counter() - began
