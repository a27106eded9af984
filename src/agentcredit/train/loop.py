"""The embedded training loop: collect → score → credit → PPO update → evaluate → checkpoint.

``train(config)`` runs one ``TrainConfig`` in its run directory (layout and crash
safety: ``train/run_dir.py``). Each stage lives in its own module and passes
plain records to the next:

    build.py          policy, collector and validation tasks (shared with eval and audit)
    warm_start.py     the tiny-model bootstrap and the SFT warm start → ``reference/``
    credit_inputs.py  the credit batch with what the estimator declared (traces, teacher)
    credit_check.py   with ``run.credit_check_every``, the credit against the solver truth
    ppo.py            scoring passes and the PPO update
    evaluate.py       validation success and rollout metrics

Every random stream is explicit (``run_dir.RandomStreams``) and saved with each
checkpoint, and evaluation draws from generators of its own, so a run killed and
resumed writes the same metrics as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from agentcredit.config import TrainConfig, config_to_dict, estimator_config, save_config
from agentcredit.credit import get_estimator
from agentcredit.credit.tokens import to_step_rows
from agentcredit.disk_full import writing
from agentcredit.jsonl_log import JsonlLog, finite_or_null, read_jsonl
from agentcredit.progress import Progress, reporting
from agentcredit.rollout.collector import broadcast_to_tokens, tensorize_steps
from agentcredit.rollout.policy import PolicyDiverged
from agentcredit.skills import SkillProvider
from agentcredit.train.build import (
    POOL,
    check_device,
    episodes_per_split,
    load_model,
    make_collector,
    rl_tasks,
    validation_tasks,
)
from agentcredit.train.credit_check import require_solver, step_credit, update_credit_check
from agentcredit.train.credit_inputs import CreditInputs
from agentcredit.train.dapo import collect_with_signal, round_first_group_id, shaped_return
from agentcredit.train.evaluate import evaluate, evaluation_generator, rollout_metrics
from agentcredit.train.live_metrics import LiveMetrics
from agentcredit.train.ppo import ppo_update, score_steps
from agentcredit.train.privileged import check_skill_texts, probe_gap_metrics, probe_set
from agentcredit.train.run_dir import RandomStreams, RunDirectory
from agentcredit.train.saved_rollouts import save_rollouts
from agentcredit.train.warm_start import prepare_start_policy


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run; ``update`` is the last update that finished."""

    def __init__(self, run_dir: Path, update: int):
        super().__init__(f"interrupted at update {update}; resume with: agentcredit train "
                         f"--resume {run_dir}")
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
    check_device(config)
    require_solver(config)
    run = RunDirectory(config.run_dir)
    run.lock()
    progress = [0, 0]  # the last finished and the last stepped update, for the messages
    try:
        with reporting(config.run.progress), _library_bars(config.run.progress):
            return _train(config, run, resume, overwrite, stop_after_update, echo, progress)
    except KeyboardInterrupt:
        raise TrainingInterrupted(run.path, progress[0]) from None
    except PolicyDiverged as err:
        if progress[1]:
            where, rate = f"at update {progress[1]}", f"optim.lr (now {config.optim.lr:g})"
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


def _train(config: TrainConfig, run: RunDirectory, resume: bool, overwrite: bool,
           stop_after_update: int | None, echo: Callable[[str], None],
           progress: list[int]) -> TrainResult:
    if overwrite:
        run.overwrite()
    point = run.resume(echo) if resume else run.create()
    with writing(run.path / "config.yaml"):
        save_config(config, run.path / "config.yaml")
    echo(f"run directory: {run.path.resolve()}")
    if config.run.save_rollouts > config.run.updates > 0:
        echo(f"warning: run.save_rollouts = {config.run.save_rollouts} is more than run.updates "
             f"= {config.run.updates}: only the last update's rollouts are saved "
             "(run.save_rollouts=1 saves every update)")
    if config.run.threads:
        torch.set_num_threads(config.run.threads)
    seed = config.run.seed
    RandomStreams.seeded(seed)
    live = LiveMetrics.open(config.run, run.path, config_to_dict(config),  # before any log line
                            point.update if point is not None else 0)
    metrics_log = JsonlLog(run.metrics)
    ledger = JsonlLog(run.ledger)

    def log(record: dict) -> None:
        metrics_log.append([finite_or_null(record)])
        live.log(record)

    # TASKS
    suite = config.env.build_suite()
    began = time.perf_counter()
    train_tasks = suite.tasks("train")
    pool = rl_tasks(config, train_tasks)  # what RL draws from: the RL pool, else every train task
    valid = validation_tasks(config, suite)
    echo(f"tasks: {len(train_tasks)} train"
         + (f" (RL on a pool of {len(pool)})" if config.env.pool_games_per_type else "")
         + ", " + ", ".join(f"{len(v)} {k}" for k, v in valid.items())
         + f" ({time.perf_counter() - began:.1f} s)")
    provider = SkillProvider(config.skills.root or None)
    if config.uses_skills:  # a missing skill file stops the run before anything is trained
        check_skill_texts(provider, [*train_tasks, *(t for tasks in valid.values() for t in tasks)])

    # MODEL
    if point is None:
        model, tokenizer = prepare_start_policy(config, run, suite, train_tasks, provider, log,
                                                echo)
    else:
        model, tokenizer = load_model(config, point.policy_dir)
    streams = RandomStreams.seeded(seed)
    reference = None
    if config.optim.kl_coef > 0 or "reference" in config.inputs:
        reference, _ = load_model(config, run.reference)
        reference.eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.optim.lr,
                                  weight_decay=config.optim.weight_decay)
    start_update, success_start = 0, None
    if point is not None and point.trainer_state is not None:
        optimizer.load_state_dict(point.trainer_state["optimizer"])
        streams.restore(point.trainer_state["random"])
        start_update, success_start = point.update, point.trainer_state["success_start"]
        echo(f"resuming after update {start_update} from {point.policy_dir.parent}")
    collector = make_collector(config, model, tokenizer, suite)
    estimator = get_estimator(config.credit.estimator)
    credit_options = estimator_config(config.credit)
    inputs = CreditInputs(config, suite, tokenizer, provider)
    probes = probe_set(config, suite, valid, tokenizer, echo)

    def run_eval(update: int, ends: bool) -> float:
        """Evaluate after ``update`` updates; ``ends``: the first or the last evaluation (the
        only ones with the held-out splits beside the pool under ``eval.held_out=ends``)."""
        began = time.perf_counter()
        splits = (valid if ends or config.eval.held_out == "every" or POOL not in valid
                  else {POOL: valid[POOL]})
        metrics = evaluate(collector, splits, temperature=config.eval.temperature,
                           generator=evaluation_generator(seed, update),
                           skills=provider if config.eval.skills else None,
                           episodes_per_game=episodes_per_split(config, splits))
        metrics = {"kind": "eval", "update": update, **metrics,
                   "time/eval": time.perf_counter() - began}
        if probes:
            began = time.perf_counter()
            metrics.update(probe_gap_metrics(
                model, tokenizer, probes, provider, action_format=config.rollout.action_format,
                micro_batch_size=config.optim.score_micro_batch_size, env=config.env.name,
                temperature=config.rollout.policy_temperature))
            metrics["time/probe_gap"] = time.perf_counter() - began
        log(metrics)
        held_out = ", ".join(f"{s} {metrics[f'eval/{s}/success']:.3f}" for s in splits
                             if s != POOL)
        if POOL in splits:  # the pool and the held-out games apart, never one merged figure
            echo(f"eval after update {update}: pool {metrics['eval/pool/success']:.3f} (games "
                 "RL trains on)" + (f"; held-out {held_out} (new games)" if held_out else ""))
        else:
            echo(f"eval after update {update}: success {metrics['eval/success']:.3f} "
                 f"({held_out})")
        return metrics["eval/success"]

    if start_update == 0 and config.run.eval_at_start:
        success_start = run_eval(0, ends=True)
    success_end = success_start
    if start_update > 0:  # resumed: the newest logged evaluation is the current one
        evals = [r for r in read_jsonl(run.metrics) if r.get("kind") == "eval"]
        success_end = evals[-1]["eval/success"] if evals else None

    k, rounds = config.rollout.tasks_per_update, config.rollout.dynamic_sampling_rounds
    shaped = functools.partial(shaped_return, max_tokens=config.rollout.max_new_tokens,
                               buffer=config.rollout.overlong_buffer,
                               penalty=config.rollout.overlong_penalty)

    def collect_groups(update: int, round_index: int, count: int) -> list:
        """``count`` new task groups of update ``update``, collection round ``round_index``."""
        tasks = (streams.task_rng.sample(pool, count) if count <= len(pool)
                 else streams.task_rng.choices(pool, k=count))
        return collector.collect(tasks, config.rollout.group_size,
                                 temperature=config.rollout.temperature,
                                 generator=streams.sampling,
                                 first_group_id=round_first_group_id(update, round_index, k,
                                                                     rounds),
                                 skills=provider if config.rollout.skills else None)

    # UPDATES
    bar = Progress("updates", config.run.updates, unit="updates", initial=start_update,
                   delay_s=0)
    update = progress[0] = progress[1] = start_update
    for update in range(start_update + 1, config.run.updates + 1):
        times = {}
        # COLLECT
        began = time.perf_counter()
        # DAPO's dynamic sampling collects again while groups lack signal (rounds > 0)
        sampled = collect_with_signal(functools.partial(collect_groups, update), k, rounds,
                                      shaped)
        trajectories = sampled.trajectories
        times["rollout"] = time.perf_counter() - began
        # SCORE
        began = time.perf_counter()
        steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
        model.eval()
        temperature = config.rollout.policy_temperature
        old_logprobs = (score_steps(model, steps, config.optim.score_micro_batch_size,
                                    temperature)
                        if config.optim.recompute_old_logprobs else steps.sampling_logprobs)
        ref_logprobs = (score_steps(reference, steps, config.optim.score_micro_batch_size,
                                    temperature)
                        if reference is not None else None)
        times["score"] = time.perf_counter() - began
        # |ℓ^b − log-prob at sampling|: ~0, since the sampler and the scorer apply the same
        # temperature; a larger value flags a scorer that differs from the sampler.
        sampling_gap = ({"score/sampling_gap": float(
            (old_logprobs - steps.sampling_logprobs)[steps.loss_mask].abs().mean())}
            if config.optim.recompute_old_logprobs else {})
        # CREDIT
        prepared = inputs.prepare(model, trajectories, steps, old_logprobs, ref_logprobs, update)
        times.update(prepared.seconds)
        began = time.perf_counter()
        credit = estimator(prepared.batch, credit_options)
        if credit.token_advantages is not None:  # token-level credit (ADRS: A^traj + η·Z^T)
            advantages = to_step_rows(credit.token_advantages.to(torch.float32), steps.loss_mask)
        else:
            advantages = broadcast_to_tokens(credit.step_advantages, steps.loss_mask)  # [S, L]
        times["credit"] = time.perf_counter() - began
        checked = {}
        if config.run.credit_check_every and update % config.run.credit_check_every == 0:
            began = time.perf_counter()
            checked = update_credit_check(config, suite.make_env, trajectories,
                                          step_credit(credit, steps.loss_mask), seed + update)
            times["credit_check"] = time.perf_counter() - began
        ledger.append(credit.ledger_rows, update=update)
        last = update == config.run.updates
        if config.run.save_rollouts and (last or update % config.run.save_rollouts == 0):
            began = time.perf_counter()
            save_rollouts(run.rollouts, update, config.credit.estimator, trajectories,
                          prepared.batch, credit, tokenizer, keep=config.run.keep_rollouts)
            times["save_rollouts"] = time.perf_counter() - began
        # PPO UPDATE
        began = time.perf_counter()
        model.train()
        update_stats = ppo_update(model, optimizer, steps, old_logprobs, ref_logprobs, advantages,
                                  config.optim, streams.sampling,
                                  teacher_logprobs=prepared.teacher, temperature=temperature)
        progress[1] = update
        model.eval()
        times["update"] = time.perf_counter() - began

        metrics = {"kind": "update", "update": update,
                   **rollout_metrics(trajectories), **update_stats, **prepared.metrics,
                   **(sampled.metrics() if rounds else {}),
                   **{f"credit/{key}": value for key, value in credit.diagnostics.items()},
                   **checked,
                   "advantage/mean_abs": float(credit.step_advantages.abs().mean()),
                   **sampling_gap,
                   "tokens/generated_per_s": sum(len(s.response_ids) for t in trajectories
                                                 for s in t.steps) / times["rollout"],
                   "tokens/trained_per_s": steps.num_response_tokens / times["update"],
                   **{f"time/{phase}": seconds for phase, seconds in times.items()}}
        log(metrics)
        bar.update(success=f"{metrics['rollout/success']:.2f}",
                   reward=f"{metrics['rollout/reward']:.2f}")

        if last or (config.run.eval_every and update % config.run.eval_every == 0):
            success_end = run_eval(update, ends=last)
        if last or update % config.run.checkpoint_every == 0:
            run.save_checkpoint(update, model, tokenizer, optimizer, streams, success_start,
                                config.run.keep_checkpoints)
        progress[0] = update
        if stop_after_update == update:
            break
    bar.close()
    metrics_log.close()
    ledger.close()
    live.close()
    return TrainResult(run.path, success_start, success_end, update)
