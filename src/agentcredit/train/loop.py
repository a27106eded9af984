"""The embedded training loop: collect → score → credit → PPO update → evaluate → checkpoint.

``train(config)`` runs one ``TrainConfig`` in its run directory::

    run_dir/
      config.yaml       the validated config
      metrics.jsonl     one line per SFT run, update and evaluation ("kind")
      ledger.jsonl      VICT credit rows, one per non-zero correction share (VICT runs)
      init_model/       the bootstrapped tiny model (embedded default only)
      reference/        the RL starting policy (after SFT), also the frozen KL reference
      checkpoints/update_NNNNN/{policy/, trainer_state.pt}

Every random stream is explicit: ``task_rng`` (task sampling), ``sampling``
(a CPU ``torch.Generator`` for token sampling and mini-batch shuffles), plus
the global python / numpy / torch states; a checkpoint saves them all with the
model, the optimiser and the update counter, and evaluation uses generators of
its own (``evaluate.evaluation_generator``). So a run killed and resumed from
its last checkpoint writes the same metrics as an uninterrupted run (the test
``test_a_killed_and_resumed_run_matches_the_uninterrupted_run`` checks it).

ADRS and its baselines (SPEC 5) add the stages of ``train/privileged.py``,
marked ``# PRIVILEGED SKILLS`` below: the teacher pass ``ℓ^T`` after scoring
(ADRS, ``opsd``, ``sdar``), token advantages (ADRS) or an auxiliary loss
(``opsd``, ``sdar``) in the PPO update, skills in rollout / evaluation prompts
only under ``rollout.skills`` / ``eval.skills``, the SFT skill mixing and the
probe token gap at every evaluation.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from agentcredit.credit import get_estimator
from agentcredit.credit.tokens import TokenScores, to_step_rows
from agentcredit.credit.vict import ABLATIONS, LedgerWriter
from agentcredit.rollout.collector import (
    CollectorConfig,
    RolloutCollector,
    StepTensors,
    broadcast_to_tokens,
    credit_batch,
    tensorize_steps,
    trim_padding,
)
from agentcredit.rollout.policy import HFPolicy
from agentcredit.rollout.prompts import PromptConfig
from agentcredit.rollout.records import Trajectory
from agentcredit.skills import SkillProvider, SkillSplicer
from agentcredit.train.config import OptimConfig, TrainConfig, estimator_config, save_config
from agentcredit.train.env_suites import EnvSuite, build_env_suite
from agentcredit.train.evaluate import evaluate, evaluation_generator
from agentcredit.train.loss import ppo_loss
from agentcredit.train.models import load_policy
from agentcredit.train.privileged import (
    auxiliary_loss,
    check_skill_texts,
    probe_gap_metrics,
    probe_gap_supported,
    probe_trajectories,
    skill_tokenizer_corpus,
    teacher_logprobs,
    with_skill_demonstrations,
)
from agentcredit.train.scoring import token_logprobs, token_logprobs_and_entropy
from agentcredit.train.sft import (
    demonstration_steps,
    demonstration_texts,
    expert_demonstrations,
    run_sft,
)
from agentcredit.train.tiny_model import bootstrap_tiny_model
from agentcredit.train.verifier_traces import VerifierTracer

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CHECKPOINT_STATE = "trainer_state.pt"
#: estimators whose batches carry verifier traces (VICT and its SPEC 4.8 controls).
TRACED_ESTIMATORS = frozenset({"vict", *ABLATIONS})


@dataclass
class TrainResult:
    """What a finished (or stopped) run reports."""

    run_dir: Path
    success_start: float | None
    success_end: float | None
    updates_done: int


class RunDirectoryError(RuntimeError):
    """The run directory cannot be used as asked (exists already, or holds nothing to resume)."""


def collector_config(config: TrainConfig) -> CollectorConfig:
    """The collector options of a run."""
    r = config.rollout
    return CollectorConfig(
        max_steps=r.max_steps, max_new_tokens=r.max_new_tokens,
        invalid_penalty=r.invalid_penalty, outcome_reward=r.outcome_reward,
        outcome_signal=r.outcome_signal,
        record_snapshots=r.record_snapshots,
        prompt=PromptConfig(history_window=r.history_window, action_format=r.action_format,
                            max_prompt_tokens=r.max_prompt_tokens),
    )


def validation_tasks(config: TrainConfig, suite: EnvSuite) -> dict:
    """The evaluated tasks by split."""
    return {split: suite.tasks(split) for split in config.eval.splits or suite.validation_splits}


def train(
    config: TrainConfig,
    *,
    resume: bool = False,
    stop_after_update: int | None = None,
    echo: Callable[[str], None] = print,
) -> TrainResult:
    """Run (or resume) the training run ``config`` describes.

    Args:
        config: the validated run configuration.
        resume: continue from the run directory's latest checkpoint (metrics
            logged after that checkpoint are dropped and recomputed).
        stop_after_update: return right after this update's checkpoint step, as
            if the process were killed there (tests use it).
        echo: where progress messages go.
    """
    run_dir = config.run_dir
    state = _open_run_dir(run_dir, resume)
    save_config(config, run_dir / "config.yaml")
    echo(f"run directory: {run_dir.resolve()}")
    if config.run.threads:
        torch.set_num_threads(config.run.threads)
    seed = config.run.seed
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    task_rng = random.Random(seed)
    sampling = torch.Generator().manual_seed(seed)
    metrics_path = run_dir / "metrics.jsonl"
    device, dtype = config.run.device, _DTYPES[config.model.dtype]

    # TASKS
    suite = build_env_suite(config.env)
    started = time.perf_counter()
    train_tasks = suite.tasks("train")
    valid = validation_tasks(config, suite)
    echo(f"tasks: {len(train_tasks)} train, "
         + ", ".join(f"{len(v)} {k}" for k, v in valid.items())
         + f" ({time.perf_counter() - started:.1f} s)")
    # PRIVILEGED SKILLS: a missing skill file stops the run before anything is trained
    provider = SkillProvider(config.skills.root or None)
    if config.uses_skills:
        check_skill_texts(provider, [*train_tasks, *(t for tasks in valid.values() for t in tasks)])

    # MODEL
    success_start = None
    if state is None:
        model, tokenizer = _prepare_start_policy(config, suite, train_tasks, metrics_path, echo,
                                                 provider)
        start_update = 0
    else:
        model, tokenizer = load_policy(str(state["dir"] / "policy"), device, dtype)
        start_update = state["update"]
        success_start = state["success_start"]
        echo(f"resuming after update {start_update} from {state['dir']}")
    reference = None
    if config.optim.kl_coef > 0:
        reference, _ = load_policy(str(run_dir / "reference"), device, dtype)
        reference.eval().requires_grad_(False)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.optim.lr,
                                  weight_decay=config.optim.weight_decay)
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        _restore_rng(state, task_rng, sampling)

    policy = HFPolicy(model, tokenizer, micro_batch_size=config.rollout.generation_batch_size)
    collector = RolloutCollector(policy, suite.make_env, collector_config(config))
    estimator = get_estimator(config.credit.estimator)
    credit_options = estimator_config(config.credit)
    tracer = (VerifierTracer(suite.make_env) if config.credit.estimator in TRACED_ESTIMATORS
              else None)
    ledger = LedgerWriter(run_dir / "ledger.jsonl") if tracer is not None else None
    # PRIVILEGED SKILLS: who sees skills (train/privileged.py), the teacher's splicer, probes
    rollout_skills = provider if config.rollout.skills else None
    eval_skills = provider if config.eval.skills else None
    splicer = SkillSplicer(tokenizer) if config.uses_skills else None
    probes = []
    if config.uses_skills and config.eval.probes > 0:
        if probe_gap_supported(config.env.name):
            probes = probe_trajectories(suite.make_env, next(iter(valid.values())), tokenizer,
                                        collector_config(config).prompt, config.eval.probes)
        else:
            echo(f"probe gap: no action words for environment {config.env.name!r} "
                 "(train.probes.ACTION_WORDS); not logged")

    def run_eval(update: int) -> float:
        began = time.perf_counter()
        metrics = evaluate(collector, valid, temperature=config.eval.temperature,
                           generator=evaluation_generator(seed, update), skills=eval_skills)
        metrics = {"kind": "eval", "update": update, **metrics,
                   "time/eval": time.perf_counter() - began}
        if probes:
            began = time.perf_counter()
            metrics.update(probe_gap_metrics(
                model, tokenizer, probes, provider, action_format=config.rollout.action_format,
                micro_batch_size=config.optim.score_micro_batch_size, env=config.env.name))
            metrics["time/probe_gap"] = time.perf_counter() - began
        _append(metrics_path, metrics)
        echo(f"eval after update {update}: success {metrics['eval/success']:.3f} ("
             + ", ".join(f"{s} {metrics[f'eval/{s}/success']:.3f}" for s in valid) + ")")
        return metrics["eval/success"]

    if state is None and config.run.eval_at_start:
        success_start = run_eval(0)
    success_end = success_start

    # UPDATES
    bar = tqdm(total=config.run.updates, initial=start_update, desc="updates",
               disable=not config.run.progress, dynamic_ncols=True)
    update = start_update
    for update in range(start_update + 1, config.run.updates + 1):
        times = {}
        began = time.perf_counter()
        k = config.rollout.tasks_per_update
        tasks = (task_rng.sample(train_tasks, k) if k <= len(train_tasks)
                 else task_rng.choices(train_tasks, k=k))
        # COLLECT
        trajectories = collector.collect(tasks, config.rollout.group_size,
                                         temperature=config.rollout.temperature,
                                         generator=sampling, first_group_id=(update - 1) * k,
                                         skills=rollout_skills)
        times["rollout"] = time.perf_counter() - began
        # SCORE
        began = time.perf_counter()
        steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
        model.eval()
        old_logprobs = score_steps(model, steps, config.optim.score_micro_batch_size)
        ref_logprobs = (score_steps(reference, steps, config.optim.score_micro_batch_size)
                        if reference is not None else None)
        times["score"] = time.perf_counter() - began
        # PRIVILEGED SKILLS: the teacher ℓ^T under the frozen behaviour snapshot (pre-update)
        teacher = None
        if config.uses_teacher:
            began = time.perf_counter()
            teacher = teacher_logprobs(model, splicer, provider, trajectories, steps,
                                       micro_batch_size=config.optim.score_micro_batch_size,
                                       reuse_prefix=config.skills.reuse_prefix)  # [S, L]
            times["teacher"] = time.perf_counter() - began
        # CREDIT
        began = time.perf_counter()
        traces = tracer.trace(trajectories) if tracer is not None else None
        times["trace"] = time.perf_counter() - began
        began = time.perf_counter()
        batch = credit_batch(trajectories, traces)
        if teacher is not None:
            batch = dataclasses.replace(batch, tokens=TokenScores.from_step_rows(
                steps.loss_mask, teacher, old_logprobs, ref_logprobs, update=update))
        credit = estimator(batch, credit_options)
        if credit.token_advantages is not None:  # ADRS: A^traj + η·Z^T per token
            advantages = to_step_rows(credit.token_advantages.to(torch.float32), steps.loss_mask)
        else:
            advantages = broadcast_to_tokens(credit.step_advantages, steps.loss_mask)  # [S, L]
        times["credit"] = time.perf_counter() - began
        if ledger is not None:
            ledger.append(credit.ledger_rows, update=update)
        # PPO UPDATE
        began = time.perf_counter()
        model.train()
        update_stats = ppo_update(model, optimizer, steps, old_logprobs, ref_logprobs,
                                  advantages, config.optim, sampling, teacher_logprobs=teacher)
        model.eval()
        times["update"] = time.perf_counter() - began

        metrics = {"kind": "update", "update": update,
                   **rollout_metrics(trajectories), **update_stats,
                   **{f"credit/{key}": value for key, value in credit.diagnostics.items()},
                   "advantage/mean_abs": float(credit.step_advantages.abs().mean()),
                   "tokens/generated_per_s": sum(len(s.response_ids) for t in trajectories
                                                 for s in t.steps) / times["rollout"],
                   "tokens/trained_per_s": steps.num_response_tokens / times["update"],
                   **{f"time/{phase}": seconds for phase, seconds in times.items()}}
        _append(metrics_path, metrics)
        bar.update(1)
        bar.set_postfix(success=f"{metrics['rollout/success']:.2f}",
                        reward=f"{metrics['rollout/reward']:.2f}")

        last = update == config.run.updates
        if last or (config.run.eval_every and update % config.run.eval_every == 0):
            success_end = run_eval(update)
        if last or update % config.run.checkpoint_every == 0:
            _save_checkpoint(run_dir, update, model, tokenizer, optimizer, task_rng, sampling,
                             success_start, config.run.keep_checkpoints)
        if stop_after_update == update:
            break
    bar.close()
    if ledger is not None:
        ledger.close()
    return TrainResult(run_dir, success_start, success_end, update)


def _prepare_start_policy(config: TrainConfig, suite: EnvSuite, train_tasks, metrics_path: Path,
                          echo: Callable[[str], None], provider: SkillProvider):
    """Bootstrap (embedded) or load the model, run the SFT warm start, save ``reference/``.

    The embedded tokenizer is fitted on the demonstrations and the environment's skill
    texts; ``sft.skill_share`` adds skill-prefixed copies of demonstrations to SFT.
    """
    run_dir = config.run_dir
    device, dtype = config.run.device, _DTYPES[config.model.dtype]
    demos = None
    if config.model.name == "embedded" or config.sft.enabled:
        began = time.perf_counter()
        demos = expert_demonstrations(suite.make_env(), train_tasks)
        echo(f"expert demonstrations: {len(demos)} episodes, "
             f"{sum(len(d.actions) for d in demos)} steps ({time.perf_counter() - began:.1f} s)")
    if config.model.name == "embedded":
        per_type = config.model.tokenizer_games_per_type
        corpus = demos if not per_type else _first_per_type(demos, per_type)
        texts = [*demonstration_texts(corpus, config.rollout.action_format),
                 *skill_tokenizer_corpus(provider, config.env.name)]
        source = bootstrap_tiny_model(texts, run_dir / "init_model", config.model.tiny)
    else:
        source = config.model.name
    model, tokenizer = load_policy(str(source), device, dtype)
    echo(f"policy: {config.model.name} ({sum(p.numel() for p in model.parameters()):,} "
         f"parameters, vocabulary {len(tokenizer)})")
    if config.sft.enabled:
        samples = demonstration_steps(demos, tokenizer, collector_config(config).prompt,
                                      recovery=config.sft.recovery, seed=config.run.seed)
        # PRIVILEGED SKILLS: SFT skill mixing (issue 5 item 6; see SFTConfig.skill_share)
        samples = with_skill_demonstrations(samples, config.sft.skill_share, provider,
                                            SkillSplicer(tokenizer), config.run.seed + 2)
        stats = run_sft(model, samples, tokenizer.pad_token_id, config.sft,
                        torch.Generator().manual_seed(config.run.seed + 1))
        _append(metrics_path, {"kind": "sft", "update": 0, **stats})
        echo(f"SFT: {int(stats['sft/steps'])} steps on {int(stats['sft/samples'])} expert steps, "
             f"loss {stats['sft/first_loss']:.3f} → {stats['sft/final_loss']:.3f} "
             f"({stats['sft/seconds']:.1f} s)")
    model.save_pretrained(run_dir / "reference")
    tokenizer.save_pretrained(run_dir / "reference")
    return model, tokenizer


def _first_per_type(demos, per_type: int):
    seen: dict[str, int] = {}
    out = []
    for demo in demos:
        if seen.get(demo.task.task_type, 0) < per_type:
            seen[demo.task.task_type] = seen.get(demo.task.task_type, 0) + 1
            out.append(demo)
    return out


# SCORING AND THE PPO UPDATE


def score_steps(model, steps: StepTensors, micro_batch_size: int) -> torch.Tensor:
    """``log π(y_l | y_<l)`` of every token of ``steps`` under ``model``, ``[S, L]``, no grad."""
    device = next(model.parameters()).device
    out = torch.zeros(steps.input_ids.shape, dtype=torch.float32)
    for start in range(0, out.shape[0], micro_batch_size):
        rows = slice(start, start + micro_batch_size)
        ids, attn = trim_padding(steps.input_ids[rows], steps.attention_mask[rows])
        logprobs = token_logprobs(model, ids.to(device), attn.to(device), ids.shape[0])
        out[rows, :ids.shape[1]] = logprobs.float().cpu()
    return out


def ppo_update(model, optimizer, steps: StepTensors, old_logprobs, ref_logprobs, advantages,
               config: OptimConfig, generator: torch.Generator,
               teacher_logprobs: torch.Tensor | None = None) -> dict[str, float]:
    """One epoch of PPO over the step samples (SPEC 1).

    The rows are shuffled with ``generator`` and split into ``config.mini_batches``
    optimiser steps; each mini-batch is processed in micro-batches whose
    losses use the mini-batch's valid-token count as ``|V|``, so gradient
    accumulation gives exactly the mini-batch's token-mean loss.

    With ``config.aux_loss`` (``opsd`` / ``sdar``, SPEC 5.6) each micro-batch adds
    ``β ·`` the auxiliary loss toward ``teacher_logprobs`` (``ℓ^T [S, L]``) to its PPO loss.

    Returns ``ppo/pg_loss``, ``ppo/kl`` (k3 to the reference), ``ppo/clip_frac``,
    ``ppo/approx_kl``, ``ppo/ratio_mean``, ``ppo/entropy`` (token means) and the
    pre-clip ``ppo/grad_norm``, each averaged over the mini-batches; with an auxiliary
    loss also ``ppo/aux_loss`` and its statistics (``ppo/opsd_gap``, ``ppo/sdar_gate_mean``, …).
    """
    aux = config.aux_loss if config.aux_loss != "none" else None
    if aux is not None and teacher_logprobs is None:
        raise ValueError(f"optim.aux_loss = {aux!r} needs the teacher log-probs ℓ^T")
    device = next(model.parameters()).device
    order = torch.randperm(steps.input_ids.shape[0], generator=generator)
    mini_batches = [rows for rows in order.tensor_split(config.mini_batches) if len(rows)]
    totals: dict[str, float] = {}
    for rows in mini_batches:
        normalizer = steps.loss_mask[rows].sum().clamp(min=1).to(torch.float32)
        sums: dict[str, float] = {}
        for micro in rows.split(config.micro_batch_size):
            parts = trim_padding(steps.input_ids[micro], steps.attention_mask[micro],
                                 steps.loss_mask[micro], old_logprobs[micro], advantages[micro],
                                 *([ref_logprobs[micro]] if ref_logprobs is not None else []),
                                 *([teacher_logprobs[micro]] if aux is not None else []))
            ids, attn, mask, old, adv = (t.to(device) for t in parts[:5])
            ref = parts[5].to(device) if ref_logprobs is not None else None
            teacher = parts[-1].to(device) if aux is not None else None
            logprobs, entropy = token_logprobs_and_entropy(model, ids, attn, ids.shape[0],
                                                           requires_grad=True)
            loss, stats = ppo_loss(logprobs, old, ref, adv, mask, config.clip_low,
                                   config.clip_high, config.kl_coef,
                                   normalizer=normalizer.to(device))
            if aux is not None:  # PRIVILEGED SKILLS: opsd / sdar
                aux_term, aux_stats = auxiliary_loss(aux, config.aux_coef, logprobs, teacher, old,
                                                     mask, normalizer.to(device))
                loss = loss + aux_term
                stats.update(aux_stats, aux_loss=float(aux_term.detach()))
            loss.backward()
            stats["entropy"] = float((entropy.detach() * mask).sum() / normalizer.to(device))
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + value
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sums["grad_norm"] = float(grad_norm)
        for key, value in sums.items():
            totals[key] = totals.get(key, 0.0) + value / len(mini_batches)
    return {f"ppo/{key}": value for key, value in totals.items()}


def rollout_metrics(trajectories: list[Trajectory]) -> dict[str, float]:
    """Reward, success, invalid-action rate and episode length of a batch of rollouts."""
    num_steps = sum(len(t.steps) for t in trajectories)
    return {
        "rollout/reward": sum(t.total_reward for t in trajectories) / len(trajectories),
        "rollout/success": sum(t.won for t in trajectories) / len(trajectories),
        "rollout/invalid_rate": sum(t.num_invalid for t in trajectories) / num_steps,
        "rollout/episode_length": num_steps / len(trajectories),
        "rollout/steps": float(num_steps),
    }


# RUN DIRECTORY, METRICS AND CHECKPOINTS


def _append(path: Path, record: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def _drop_after(path: Path, update: int) -> None:
    """Keep the JSONL lines of ``path`` whose ``update`` is <= ``update`` (atomic rewrite)."""
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines()
            if line.strip() and json.loads(line).get("update", 0) <= update]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    tmp.replace(path)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint directory of ``run_dir``, or None."""
    root = Path(run_dir) / "checkpoints"
    done = sorted(p for p in root.glob("update_*") if (p / CHECKPOINT_STATE).is_file())
    return done[-1] if done else None


def _open_run_dir(run_dir: Path, resume: bool) -> dict | None:
    """Create the run directory, or load the state to resume; drops metrics and ledger rows
    written after the checkpoint."""
    metrics_path = run_dir / "metrics.jsonl"
    if not resume:
        if metrics_path.exists() or (run_dir / "checkpoints").exists():
            raise RunDirectoryError(
                f"run directory {run_dir} already holds a run; resume it with "
                f"`agentcredit train --resume {run_dir}` or choose another run.name=...")
        run_dir.mkdir(parents=True, exist_ok=True)
        return None
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        raise RunDirectoryError(
            f"nothing to resume in {run_dir}: it has no complete checkpoint; start a fresh run "
            "with another run.name=...")
    try:
        state = torch.load(checkpoint / CHECKPOINT_STATE, weights_only=False)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as err:  # torn or foreign
        raise RunDirectoryError(f"cannot read {checkpoint / CHECKPOINT_STATE} ({err}); delete "
                                "that checkpoint folder to resume from the one before") from None
    state["dir"] = checkpoint
    for log in (metrics_path, run_dir / "ledger.jsonl"):
        _drop_after(log, state["update"])
    return state


def _save_checkpoint(run_dir: Path, update: int, model, tokenizer, optimizer, task_rng,
                     sampling: torch.Generator, success_start, keep: int) -> Path:
    root = run_dir / "checkpoints"
    final = root / f"update_{update:05d}"
    tmp = root / f".tmp_update_{update:05d}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp / "policy")
    tokenizer.save_pretrained(tmp / "policy")
    torch.save({
        "update": update,
        "success_start": success_start,
        "optimizer": optimizer.state_dict(),
        "task_rng": task_rng.getstate(),
        "sampling": sampling.get_state(),
        "python_random": random.getstate(),
        "numpy_random": np.random.get_state(),
        "torch_random": torch.get_rng_state(),
    }, tmp / CHECKPOINT_STATE)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    for old in sorted(root.glob("update_*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _restore_rng(state: dict, task_rng: random.Random, sampling: torch.Generator) -> None:
    task_rng.setstate(state["task_rng"])
    sampling.set_state(state["sampling"])
    random.setstate(state["python_random"])
    np.random.set_state(state["numpy_random"])
    torch.set_rng_state(state["torch_random"])
