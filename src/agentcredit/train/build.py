"""From a config to the pieces a run plays with: model, collector, tasks (train, eval and audit).

``train``, ``agentcredit eval`` and ``agentcredit audit`` build their policy, rollout
collector and validation tasks here, so the three see the same prompts, step
limits and dtype.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

import torch

from agentcredit.config import ConfigError, TrainConfig
from agentcredit.config.checks import ModelSize, check_memory
from agentcredit.config.environment import POOL
from agentcredit.envs.base import Task
from agentcredit.envs.suites import EnvSuite
from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import HFPolicy
from agentcredit.rollout.prompts import PromptConfig
from agentcredit.train.model_loading import load_policy
from agentcredit.train.precision import DTYPES, mixed_precision


def check_device(config: TrainConfig, training: bool = False) -> None:
    """Refuse a device this machine does not have, or a ``model.dtype`` it (or ``training``)
    cannot use, before anything expensive runs."""
    device, dtype = config.run.device, config.model.dtype
    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise ConfigError(f"run.device = {device!r} is not a torch device; use cpu, cuda or "
                          "cuda:N") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"run.device = {device!r} but torch sees no CUDA device on this "
                          "machine; use run.device=cpu")
    if kind == "cuda" and dtype == "bfloat16" and not torch.cuda.is_bf16_supported():
        raise ConfigError(f"model.dtype = 'bfloat16' but the GPU {device} cannot compute in "
                          "bfloat16 (it is older than NVIDIA's Ampere); use model.dtype=float32")
    if training and dtype == "float16":
        raise ConfigError("model.dtype = 'float16' trains without the loss scaler float16 "
                          "gradients need (small ones underflow to 0); use model.dtype=bfloat16 "
                          "(or float32)")


def collector_config(config: TrainConfig) -> CollectorConfig:
    """The collector options of a run."""
    r = config.rollout
    return CollectorConfig(
        max_steps=r.max_steps, max_new_tokens=r.max_new_tokens,
        invalid_penalty=r.invalid_penalty, outcome_reward=r.outcome_reward,
        outcome_signal=r.outcome_signal,
        record_snapshots=r.record_snapshots, decoding=r.decoding,
        reuse_prompt_cache=r.reuse_prompt_cache,
        prompt=PromptConfig(history_window=r.history_window, history_style=r.history_style,
                            action_format=r.action_format,
                            max_prompt_tokens=r.max_prompt_tokens),
    )


def load_model(config: TrainConfig, source: str | Path, training: bool = False):
    """``(model, tokenizer)`` from a model folder or hub id, on the run's device (refused first
    when this machine lacks it), computing in ``model.dtype`` (``train/precision.py``).

    A model loaded for ``training`` holds float32 weights (its gradients and AdamW state follow
    them) and runs its forwards under autocast to ``model.dtype``; any other (a frozen
    reference, an evaluated checkpoint) is loaded in ``model.dtype``. A model loaded for
    ``training`` is refused before its weights are read when the run's memory estimate for it
    (``check_memory``, from its ``config.json``) is over the memory of the device that holds
    it."""
    check_device(config, training)
    compute = DTYPES[config.model.dtype]
    model, tokenizer = load_policy(
        str(source), config.run.device, torch.float32 if training else compute,
        check_size=partial(_check_memory_on_device, config) if training else None)
    return mixed_precision(model, compute, config.model.fp32_lm_head), tokenizer


def _check_memory_on_device(config: TrainConfig, size: ModelSize) -> None:
    """``check_memory`` of a model of ``size`` against the memory of the run's device: a GPU's
    own memory on ``cuda``, this machine's on ``cpu``."""
    device = torch.device(config.run.device)
    memory = None
    if device.type == "cuda":
        memory = (torch.cuda.mem_get_info(device)[1], f"the GPU {config.run.device}")
    check_memory(config, size, memory)


def make_collector(config: TrainConfig, model, tokenizer, suite: EnvSuite) -> RolloutCollector:
    """The rollout collector that plays ``model`` on ``suite``'s environments."""
    policy = HFPolicy(model, tokenizer, micro_batch_size=config.rollout.generation_batch_size)
    return RolloutCollector(policy, suite.make_env, collector_config(config))


def validation_tasks(config: TrainConfig, suite: EnvSuite) -> dict[str, list[Task]]:
    """The evaluated tasks by split: ``eval.splits``, else the environment's own validation
    splits and, when there is an RL pool, the ``pool`` split (``rl_tasks``) after them."""
    splits = config.eval.splits or [*suite.validation_splits,
                                    *([POOL] if config.env.pool_games_per_type else [])]
    return {split: rl_tasks(config, suite.tasks("train")) if split == POOL else suite.tasks(split)
            for split in splits}


def episodes_per_split(config: TrainConfig, splits: Iterable[str]) -> dict[str, int]:
    """Episodes played per game of each of ``splits`` at evaluation: ``eval.episodes_per_game``,
    ``eval.pool_episodes_per_game`` for the pool."""
    return {split: config.eval.pool_episodes_per_game if split == POOL
            else config.eval.episodes_per_game for split in splits}


def rl_tasks(config: TrainConfig, train_tasks: Sequence[Task]) -> list[Task]:
    """The tasks RL draws from: the pool (``env.pool_games_per_type``) when there is one, else
    every train task."""
    per_type = config.env.pool_games_per_type
    return draw_pool(train_tasks, per_type, config.run.seed) if per_type else list(train_tasks)


def draw_pool(train_tasks: Sequence[Task], per_type: int, seed: int) -> list[Task]:
    """Up to ``per_type`` tasks of each task type, drawn without replacement from
    ``train_tasks`` by a generator of ``seed`` alone (the same pool for every method and
    setting of a seed), in ``train_tasks``' order. A type with fewer train tasks brings all of
    them (the embedded preset's pool of 4 per type also fits a small Search-QA or tau set)."""
    rng = random.Random(f"rl-pool/{seed}")
    by_type: dict[str, list[int]] = {}
    for index, task in enumerate(train_tasks):
        by_type.setdefault(task.task_type, []).append(index)
    chosen = []
    for indices in by_type.values():
        chosen += rng.sample(indices, min(per_type, len(indices)))
    return [train_tasks[index] for index in sorted(chosen)]
