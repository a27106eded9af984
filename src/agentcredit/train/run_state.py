"""What a training run holds (``TrainState``), built once by ``setup``.

``setup`` opens the run directory (fresh, overwritten or resumed: ``run/directory.py``),
loads the tasks and the policy (warm-started for a new run:
``warm_start/start_policy.py``), and builds what the updates use: the ``Learner`` they
change, the ``RunContext`` they read (``update.py``) and the logs the loop appends to
(``RunLogs``). The global generators are seeded before the warm start and again before the
updates, so the updates start from the same state whether the start policy was trained,
read from the cache or loaded (``run/random_streams.py``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from agentcredit.config import TrainConfig, config_to_dict, estimator_config
from agentcredit.credit import get_estimator
from agentcredit.credit.overlong import OverlongPenalty
from agentcredit.envs.suites import EnvSuite
from agentcredit.jsonl_log import JsonlLog, finite_or_null
from agentcredit.run.directory import RunDirectory
from agentcredit.run.live_metrics import LiveMetrics
from agentcredit.run.random_streams import RandomStreams, seed_global_generators
from agentcredit.skills import SkillProvider
from agentcredit.train.batch_source import GroupSource
from agentcredit.train.build import load_model, make_collector, rl_tasks, validation_tasks
from agentcredit.train.credit_inputs import CreditInputs
from agentcredit.train.evaluation.probes import probe_set
from agentcredit.train.scoring.passes import scoring_passes
from agentcredit.train.update import Learner, RunContext
from agentcredit.train.warm_start.skill_texts import check_skill_texts
from agentcredit.train.warm_start.start_policy import prepare_start_policy


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
    """Everything a run holds, built once by ``setup``.

    Attributes:
        learner: what the updates change (the policy, its optimiser, the random streams).
        context: what the updates read (the config, the batch source, the scorers, the
            estimator).
        run: the run directory. suite: its environments.
        provider: the privileged skill texts.
        valid: the evaluation splits' tasks; probes: the probe-gap set (may be empty).
        logs: the run's logs.
        success_start: the success of the evaluation before training, once known.
        start_update: the last update a resumed run had finished (0 for a new run).
        finished: the last update whose checkpoint step ran (for Ctrl-C's message).
    """

    learner: Learner
    context: RunContext
    run: RunDirectory
    suite: EnvSuite
    provider: SkillProvider
    valid: dict
    probes: list
    logs: RunLogs
    success_start: float | None
    start_update: int
    finished: int

    @property
    def config(self) -> TrainConfig:
        """The run's config (the context's)."""
        return self.context.config


def setup(config: TrainConfig, run: RunDirectory, resume: bool, overwrite: bool,
          echo: Callable[[str], None]) -> TrainState:
    """Open the run directory (fresh, overwritten or resumed), load the tasks and the policy
    (warm-started for a new run), and build what the updates use."""
    if overwrite:
        run.overwrite()
    point = run.resume(echo) if resume else run.create()
    run.write_config(config_to_dict(config))
    echo(f"run directory: {run.path.resolve()}")
    if config.run.save_rollouts > config.run.updates > 0:
        echo(f"warning: run.save_rollouts = {config.run.save_rollouts} is more than run.updates "
             f"= {config.run.updates}: only the last update's rollouts are saved "
             "(run.save_rollouts=1 saves every update)")
    if config.run.threads:
        torch.set_num_threads(config.run.threads)
    seed_global_generators(config.run.seed)  # what the warm start draws without a stream of its own
    live = LiveMetrics.open(config.run, run.path, config_to_dict(config),  # before any log line
                            point.update if point is not None else 0)
    logs = RunLogs(JsonlLog(run.metrics), live, JsonlLog(run.ledger))

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
    if (note := getattr(suite, "cache_note", lambda: None)()) is not None:
        print(note, file=sys.stderr, flush=True)
    provider = SkillProvider(config.skills.root or None)
    if config.uses_skills:  # a missing skill file stops the run before anything is trained
        check_skill_texts(provider, [*train_tasks, *(t for tasks in valid.values() for t in tasks)])

    # MODEL
    if point is None:
        model, tokenizer = prepare_start_policy(config, run, suite, train_tasks, provider, logs.log,
                                                echo)
    else:
        model, tokenizer = load_model(config, point.policy_dir, training=True)
    # again: the updates start from the same global state whether the start policy was
    # trained, read from the cache or loaded
    seed_global_generators(config.run.seed)
    streams = RandomStreams.seeded(config.run.seed, device=config.run.device)
    passes = scoring_passes(config)
    reference = None
    if "reference" in passes:
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
    rollout = config.rollout
    batches = GroupSource(make_collector(config, model, tokenizer, suite), pool,
                          rollout.group_size, rollout.temperature, rollout.tasks_per_update,
                          rollout.dynamic_sampling_rounds, OverlongPenalty.of(rollout),
                          skills=provider if rollout.skills else None)
    context = RunContext(config=config, passes=passes, tokenizer=tokenizer, reference=reference,
                         batches=batches, estimator=get_estimator(config.credit.estimator),
                         credit_options=estimator_config(config.credit),
                         inputs=CreditInputs(config, suite, tokenizer, provider))
    return TrainState(
        learner=Learner(model, optimizer, streams, stepped=start_update), context=context,
        run=run, suite=suite, provider=provider, valid=valid,
        probes=probe_set(config, suite, valid, tokenizer, echo), logs=logs,
        success_start=success_start, start_update=start_update, finished=start_update)
