"""The RL starting policy: bootstrap or load the model, the SFT warm start, ``reference/``.

The embedded tokenizer is fitted on the expert demonstrations and the
environment's skill texts; ``sft.skill_share`` adds skill-prefixed copies of
demonstrations to SFT (``SFTConfig.skill_share``). The embedded start is read back from
``sft.cache_dir`` when everything it depends on is unchanged (``start_cache``).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

import torch

from agentcredit.config import TrainConfig
from agentcredit.envs.base import Task
from agentcredit.envs.suites import EnvSuite
from agentcredit.progress import Progress, track
from agentcredit.run.directory import RunDirectory
from agentcredit.run.safe_files import new_folder
from agentcredit.skills import SkillProvider, SkillSplicer
from agentcredit.train.build import collector_config, load_model
from agentcredit.train.model_loading import ModelLoadError
from agentcredit.train.prefix_tree import layout_line
from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model
from agentcredit.train.warm_start.sft import (
    demonstration_steps,
    demonstration_texts,
    expert_demonstrations,
    run_sft,
    with_skill_demonstrations,
)
from agentcredit.train.warm_start.skill_texts import skill_tokenizer_corpus
from agentcredit.train.warm_start.start_cache import CachedStart, StartCache, start_inputs


def prepare_start_policy(config: TrainConfig, run: RunDirectory, suite: EnvSuite,
                         train_tasks: Sequence[Task], provider: SkillProvider,
                         log: Callable[[dict], None], echo: Callable[[str], None]):
    """``(model, tokenizer)`` of the RL start, saved as ``run/reference``; ``log`` gets the SFT
    metrics line."""
    embedded = config.model.name == "embedded"
    cache = inputs = None
    if embedded and config.sft.enabled and config.sft.cache:
        cache = StartCache(config.sft.cache_dir)
        inputs = start_inputs(config, train_tasks,
                              skill_tokenizer_corpus(provider, config.env.name))
        if (entry := cache.find(inputs)) is not None:
            began = time.perf_counter()
            try:  # an entry is checked as any model folder is; a bad one is only a miss
                model, tokenizer = load_model(config, entry.reference, training=True)
            except (ModelLoadError, OSError) as err:
                cache.set_aside(entry, str(err))
            else:
                return _reused_start(config, run, entry, model, tokenizer, began, log, echo)
    if not embedded:  # a bad checkpoint fails before the demonstrations are played
        model, tokenizer = load_model(config, config.model.name, training=True)
    demos = None
    if embedded or config.sft.enabled:
        began = time.perf_counter()
        copies, noise, note = demonstration_settings(config, suite.make_env())
        if note:
            echo(note)
        demos = play_demonstrations(suite, train_tasks, copies, noise, config.run.seed)
        echo(f"expert demonstrations: {len(demos)} episodes, "
             f"{sum(len(d.actions) for d in demos)} steps ({time.perf_counter() - began:.1f} s)")
    if embedded:
        per_type = config.model.tokenizer_games_per_type
        corpus = demos if not per_type else _first_per_type(demos, per_type)
        texts = [*demonstration_texts(corpus, config.rollout.action_format,
                                      config.rollout.history_style),
                 *skill_tokenizer_corpus(provider, config.env.name)]
        model, tokenizer = load_model(
            config, bootstrap_tiny_model(texts, new_folder(run.path / "init_model"),
                                         config.model.tiny),
            training=True)
    echo(f"policy: {config.model.name} ({sum(p.numel() for p in model.parameters()):,} "
         f"parameters, vocabulary {len(tokenizer)})")
    echo(layout_line(model, config.optim.layout))  # which layout every pass runs, and why
    sft_record = None
    if config.sft.enabled:
        samples = demonstration_steps(demos, tokenizer, collector_config(config).prompt,
                                      recovery=config.sft.recovery, seed=config.run.seed,
                                      decoding=config.rollout.decoding)
        samples = with_skill_demonstrations(samples, config.sft.skill_share, provider,
                                            SkillSplicer(tokenizer,
                                                         config.rollout.max_prompt_tokens),
                                            config.run.seed + 2)
        with Progress("SFT", 0, unit="steps") as bar:  # run_sft reports its step count
            stats = run_sft(model, samples, tokenizer.pad_token_id, config.sft,
                            torch.Generator().manual_seed(config.run.seed + 1),
                            progress=lambda step, steps, loss: bar.update(total=steps,
                                                                          loss=f"{loss:.3f}"),
                            layout=config.optim.layout,
                            gradient_checkpointing=config.optim.gradient_checkpointing)
        sft_record = {"kind": "sft", "update": 0, **stats}
        log(sft_record)
        echo(f"SFT: {int(stats['sft/steps'])} steps on {int(stats['sft/samples'])} expert steps, "
             f"loss {stats['sft/first_loss']:.3f} → {stats['sft/final_loss']:.3f} "
             f"({stats['sft/seconds']:.1f} s)")
    run.save_reference(model, tokenizer)
    if cache is not None:
        try:
            cache.store(inputs, run.reference, sft_record)
        except OSError as err:  # a cache only speeds runs up: one that cannot be written is skipped
            print(f"warning: sft.cache_dir {cache.root} cannot be used ({err}); the run goes on "
                  "without storing its start there", file=sys.stderr, flush=True)
    return model, tokenizer


def _reused_start(config: TrainConfig, run: RunDirectory, entry: CachedStart, model, tokenizer,
                  began: float, log: Callable[[dict], None], echo: Callable[[str], None]):
    """The cached start ``entry`` (its ``model`` and ``tokenizer``, read since ``began``) as
    the run's ``reference/``; its SFT line is logged again with ``sft/reused`` 1 and
    ``sft/seconds`` the time the reading took."""
    run.save_reference(model, tokenizer)
    log({**entry.sft_record(), "sft/seconds": time.perf_counter() - began, "sft/reused": 1.0})
    print(f"warm start: reused the tokenizer, model and SFT trained with these settings, games "
          f"and code from {entry.folder} (sft.cache=false trains them again)",
          file=sys.stderr, flush=True)
    echo(f"policy: {config.model.name} ({sum(p.numel() for p in model.parameters()):,} "
         f"parameters, vocabulary {len(tokenizer)}), read from the cache")
    echo(layout_line(model, config.optim.layout))
    return model, tokenizer


#: below this many tasks the demonstrations play in this process (a worker takes seconds to
#: start)
PARALLEL_TASKS = 32
_worker_env = None


def _open_env(suite: EnvSuite) -> None:
    global _worker_env
    _worker_env = suite.make_env()


def _play_task(task: Task, copies: int, noise: float, seed: int) -> list:
    return expert_demonstrations(_worker_env, [task], copies=copies, noise=noise, seed=seed)


def play_demonstrations(suite: EnvSuite, tasks: Sequence[Task], copies: int, noise: float,
                        seed: int, workers: int | None = None) -> list:
    """``expert_demonstrations`` of every task, in task order, with an ``expert
    demonstrations`` bar that moves with every task.

    A task's demonstrations depend only on the task, ``copies``, ``noise`` and ``seed``, so
    ``workers`` processes (None: one per CPU core, at most 8, for ``PARALLEL_TASKS`` tasks
    or more, unless this process is a daemon, such as a ``multiprocessing.Pool`` worker, which
    may start no process) play them at once with the same result, each on its own environment.
    """
    if workers is None:
        parallel = len(tasks) >= PARALLEL_TASKS and not multiprocessing.current_process().daemon
        workers = min(os.cpu_count() or 1, 8) if parallel else 1
    if workers <= 1:
        _open_env(suite)
        return [demo for task in track(tasks, "expert demonstrations", unit="episodes")
                for demo in _play_task(task, copies, noise, seed)]
    context = multiprocessing.get_context("spawn")  # this process may hold torch's threads
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_open_env,
                             initargs=(suite,)) as pool:
        jobs = [pool.submit(_play_task, task, copies, noise, seed) for task in tasks]
        return [demo for job in track(jobs, "expert demonstrations", unit="episodes")
                for demo in job.result()]


def demonstration_settings(config: TrainConfig, env) -> tuple[int, float, str | None]:
    """``(copies, noise, note)`` of the warm start's demonstrations on ``env``.

    ``sft.demonstrations_per_task`` and ``sft.demonstration_noise`` need a demonstrator that
    labels and recovers (``labelled_demonstration``, ALFWorld's); any other environment plays
    one clean demonstration per task, and ``note`` is the line that says so and names the
    missing hook (else None).
    """
    copies, noise = config.sft.demonstrations_per_task, config.sft.demonstration_noise
    if (copies == 1 and noise == 0) or hasattr(env, "labelled_demonstration"):
        return copies, noise, None
    return 1, 0.0, (f"sft.demonstrations_per_task = {copies} and sft.demonstration_noise = "
                    f"{noise} need the environment hook labelled_demonstration(task, rng, "
                    f"noise), which {config.env.name} lacks: it plays one clean demonstration "
                    "per task (docs/extending.md, Demonstrations for the warm start)")


def _first_per_type(demos, per_type: int):
    seen: dict[str, int] = {}
    out = []
    for demo in demos:
        if seen.get(demo.task.task_type, 0) < per_type:
            seen[demo.task.task_type] = seen.get(demo.task.task_type, 0) + 1
            out.append(demo)
    return out
