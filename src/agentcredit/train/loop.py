"""The embedded training run: set up, then updates with evaluation and checkpoints around them.

``train(config)`` runs one ``TrainConfig`` in its run directory (layout and crash
safety: ``run/directory.py``): ``run_state.setup`` builds the ``TrainState`` (tasks, the
policy, warm-started for a new run, the learner and the run context of the updates, the logs)
and ``run_updates`` runs ``update.update_step`` for each update, then writes what it left
(``write_update``: the credit check, the ledger, the saved rollouts, the metrics line),
evaluating and checkpointing when they are due. The stages and the modules that own them:

    run_state.py                 what a run holds, built once (``setup``)
    build.py                     policy, collector and validation tasks (shared with eval
                                 and audit)
    warm_start/start_policy.py   the tiny-model bootstrap and the SFT warm start → ``reference/``
    batch_source.py              where each update's groups come from
    update.py                    one update: collect → score → credit → PPO (its own docstring)
    rollout_metrics.py           what an update logs about its rollouts (``rollout/*``)
    evaluation/evaluate.py       validation success
    evaluation/credit_check/     with ``run.credit_check_every``, the update's credit against
                                 the solver truth (``check.py``)

Every random stream is explicit (``run.random_streams.RandomStreams``) and saved with each
checkpoint, and evaluation draws from generators of its own, so a run killed and
resumed writes the same metrics as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentcredit.config import TrainConfig
from agentcredit.jsonl_log import read_jsonl
from agentcredit.progress import Progress, reporting
from agentcredit.rollout.policy import PolicyDiverged
from agentcredit.run.directory import RunDirectory
from agentcredit.run.saved_rollouts import save_rollouts
from agentcredit.testing.env_conformance import refuse_nonconforming_environment
from agentcredit.train.build import POOL, check_device, episodes_per_split
from agentcredit.train.evaluation.evaluate import evaluate, evaluation_generator
from agentcredit.train.evaluation.probes import probe_gap_metrics
from agentcredit.train.run_state import TrainState, setup
from agentcredit.train.update import UpdateArtifacts, update_step


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; ``update`` is the last update that finished."""

    def __init__(self, run_dir: Path, update: int):
        super().__init__(RunDirectory(run_dir).interrupted_hint(update))
        self.run_dir, self.update = run_dir, update


@dataclass
class TrainResult:
    """What a finished (or stopped) run reports."""

    run_dir: Path
    success_start: float | None
    success_end: float | None
    updates_done: int


def train(config: TrainConfig, *, resume: bool = False, overwrite: bool = False,
          stop_after_update: int | None = None, echo: Callable[[str], None] = print
          ) -> TrainResult:
    """Run (or resume) the training run ``config`` describes, holding its folder's lock.

    Args:
        config: the validated run configuration.
        resume: continue from the run directory's newest usable checkpoint.
        overwrite: delete what a previous run left in the run directory first.
        stop_after_update: return right after this update's checkpoint step, as
            if the process were killed there (tests use it).
        echo: where progress messages go (one line per phase); the progress bars of the
            long phases go to stderr unless ``run.progress`` is false (``agentcredit.progress``).
    """
    check_device(config, training=True)
    refuse_nonconforming_environment(config.env)  # a broken plug-in: one line, before SFT
    if config.run.credit_check_every:  # a run without the check never loads its package
        from agentcredit.train.evaluation.credit_check.check import require_solver

        require_solver(config)
    run = RunDirectory(config.run_dir)
    run.lock()
    state = None  # set once the run is built: how far its updates got, for the messages
    try:
        with reporting(config.run.progress), _library_bars(config.run.progress):
            state = setup(config, run, resume, overwrite, echo)
            return run_updates(state, stop_after_update, echo)
    except KeyboardInterrupt:
        raise TrainingInterrupted(run.path, state.finished if state else 0) from None
    except PolicyDiverged as err:
        if state is not None and state.learner.stepped:
            stepped = state.learner.stepped
            where, rate = f"at update {stepped}", f"optim.lr (now {config.optim.lr:g})"
        else:
            where, rate = "before the first update", f"sft.lr (now {config.sft.lr:g})"
        raise PolicyDiverged(f"training diverged {where}: {err}; lower {rate} and start "
                             "again") from None
    finally:
        run.unlock()


@contextlib.contextmanager
def _library_bars(shown: bool) -> Iterator[None]:
    """During a run, hide transformers' per-file bars ("Loading weights", "Writing model
    shards": instant, and one pair per checkpoint, they would drown the phases' bars in a
    log) and let the Hub's download bars follow ``run.progress``; restore both afterwards."""
    import huggingface_hub.utils as hub
    from transformers.utils import logging as hf_logging

    transformers_before = hf_logging.is_progress_bar_enabled()
    hub_before = not hub.are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # the Hub's bars too
    if shown and hub_before:
        hub.enable_progress_bars()
    try:
        yield
    finally:
        (hf_logging.enable_progress_bar if transformers_before
         else hf_logging.disable_progress_bar)()
        (hub.enable_progress_bars if hub_before else hub.disable_progress_bars)()


def run_updates(state: TrainState, stop_after_update: int | None,
                echo: Callable[[str], None]) -> TrainResult:
    """The updates after ``state.start_update``, each followed by its evaluation and
    checkpoint when they are due; the evaluation before training for a new run."""
    config, run = state.config, state.run
    if state.start_update == 0 and config.run.eval_at_start:
        state.success_start = evaluate_after(state, 0, True, echo)
    success_end = state.success_start
    if state.start_update > 0:  # resumed: the newest logged evaluation is the current one
        evals = [r for r in read_jsonl(run.metrics) if r.get("kind") == "eval"]
        success_end = evals[-1]["eval/success"] if evals else None
    bar = Progress("updates", config.run.updates, unit="updates", initial=state.start_update,
                   delay_s=0)
    update = state.start_update
    for update in range(state.start_update + 1, config.run.updates + 1):
        metrics, made = update_step(state.learner, state.context, update)
        metrics.update(write_update(state, update, made))
        state.logs.log(metrics)
        bar.update(success=f"{metrics['rollout/success']:.2f}",
                   reward=f"{metrics['rollout/reward']:.2f}")
        last = update == config.run.updates
        if last or (config.run.eval_every and update % config.run.eval_every == 0):
            success_end = evaluate_after(state, update, last, echo)
        if last or update % config.run.checkpoint_every == 0:
            learner = state.learner
            run.save_checkpoint(update, learner.model, state.context.tokenizer, learner.optimizer,
                                learner.streams, state.success_start, config.run.keep_checkpoints)
        state.finished = update
        if stop_after_update == update:
            break
    bar.close()
    state.logs.close()
    return TrainResult(run.path, state.success_start, success_end, update)


def write_update(state: TrainState, update: int, made: UpdateArtifacts) -> dict[str, Any]:
    """Write what update ``update`` left, in order: the credit check against the solver truth
    when ``run.credit_check_every`` is due, the ledger rows, the saved rollouts when
    ``run.save_rollouts`` is due (with the check's truth). Returns the check's
    ``credit_check/*`` figures and the seconds each part took (``time/*``), for the update's
    metrics line."""
    config, metrics = state.config, {}
    truth, every = None, config.run.credit_check_every
    if every and update % every == 0:
        from agentcredit.train.evaluation.credit_check.check import (
            step_credit,
            update_credit_check,
        )

        began = time.perf_counter()
        checked, truth = update_credit_check(config, state.suite.make_env, made.trajectories,
                                             step_credit(made.credit, made.loss_mask),
                                             config.run.seed + update)
        metrics.update(checked, **{"time/credit_check": time.perf_counter() - began})
    state.logs.ledger.append(made.credit.ledger_rows, update=update)
    every = config.run.save_rollouts
    if every and (update == config.run.updates or update % every == 0):
        began = time.perf_counter()
        save_rollouts(state.run.rollouts, update, config.credit.estimator, made.trajectories,
                      made.batch, made.credit, state.context.tokenizer,
                      keep=config.run.keep_rollouts, truth=truth)
        metrics["time/save_rollouts"] = time.perf_counter() - began
    return metrics


def evaluate_after(state: TrainState, update: int, ends: bool,
                   echo: Callable[[str], None]) -> float:
    """Evaluate after ``update`` updates, log it and return the success; ``ends``: the first
    or the last evaluation (the only ones with the held-out splits beside the pool under
    ``eval.held_out=ends``)."""
    config, valid, provider = state.config, state.valid, state.provider
    began = time.perf_counter()
    splits = (valid if ends or config.eval.held_out == "every" or POOL not in valid
              else {POOL: valid[POOL]})
    metrics = evaluate(state.context.batches.collector, splits, temperature=config.eval.temperature,
                       generator=evaluation_generator(config.run.seed, update),
                       skills=provider if config.eval.skills else None,
                       episodes_per_game=episodes_per_split(config, splits))
    metrics = {"kind": "eval", "update": update, **metrics,
               "time/eval": time.perf_counter() - began}
    if state.probes:
        began = time.perf_counter()
        metrics.update(probe_gap_metrics(
            state.learner.model, state.context.tokenizer, state.probes, provider,
            action_format=config.rollout.action_format,
            micro_batch_size=config.optim.score_micro_batch_size, env=config.env.name,
            temperature=config.rollout.policy_temperature, layout=config.optim.layout))
        metrics["time/probe_gap"] = time.perf_counter() - began
    state.logs.log(metrics)
    held_out = ", ".join(f"{s} {metrics[f'eval/{s}/success']:.3f}" for s in splits
                         if s != POOL)
    if POOL in splits:  # the pool and the held-out games apart, never one merged figure
        echo(f"eval after update {update}: pool {metrics['eval/pool/success']:.3f} (games "
             "RL trains on)" + (f"; held-out {held_out} (new games)" if held_out else ""))
    else:
        echo(f"eval after update {update}: success {metrics['eval/success']:.3f} "
             f"({held_out})")
    return metrics["eval/success"]
