"""The VICT interface audit (VICT paper Table 5; docs/vict.md §4.9) behind ``agentcredit audit``.

Rollouts come from three sources, each traced through the tasks' verifiers and
audited as one row: the expert's plan, uniformly random admissible actions, and,
given a checkpoint, the policy itself (sampled at the rollout temperature).
Every row reports atoms per task, reconstruction %, mutation conformance %,
eligibility pass %, proof coverage % and abstention %, then the atoms' Level-0/1/2
instrumentation mix, the share flagged irreversible and the (rollout, atom) pairs that
broke that flag (VICT paper appendix C and Table 9; docs/vict.md §4.1, §4.9).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import torch

from agentcredit.config_schema import ConfigError
from agentcredit.credit.vict import AuditRow, format_audit_table, interface_audit
from agentcredit.envs.base import Environment, Task
from agentcredit.verifier.closure import DependencyGraph
from agentcredit.verifier.trace import RolloutTrace, trace_rollout


def scripted_traces(env: Environment, tasks: Sequence[Task], source: str, copies: int,
                    max_steps: int, seed: int) -> list[RolloutTrace]:
    """``copies`` traced rollouts per task from ``source`` = ``expert`` or ``random``."""
    if source not in ("expert", "random"):
        raise ValueError(f"unknown rollout source {source!r}; use 'expert' or 'random'")
    traces = []
    for k, task in enumerate(tasks):
        verifier = env.verifier(task)
        graph = DependencyGraph.from_atoms(verifier.atoms)
        plan = env.expert(task) if source == "expert" else None
        for copy in range(copies):
            rng = random.Random(f"{seed}/{k}/{copy}")
            obs = env.reset(task)
            observations, snapshots, actions, valid = [obs.text], [env.snapshot()], [], []
            for t in range(len(plan) if plan is not None else max_steps):
                action = plan[t] if plan is not None else rng.choice(obs.admissible_actions)
                obs, _, done, info = env.step(action)
                observations.append(obs.text)
                snapshots.append(env.snapshot())
                actions.append(action)
                valid.append(info.valid)
                if done:
                    break
            traces.append(trace_rollout(verifier, observations, snapshots, actions, valid=valid,
                                        graph=graph))
    return traces


def policy_traces(config, checkpoint: Path, tasks: Sequence[Task],
                  copies: int) -> list[RolloutTrace]:
    """``copies`` rollouts per task sampled from the policy in ``checkpoint``, traced."""
    from agentcredit.train.build import load_model, make_collector
    from agentcredit.train.env_suites import build_env_suite
    from agentcredit.train.verifier_traces import VerifierTracer

    model, tokenizer = load_model(config, checkpoint)
    suite = build_env_suite(config.env)
    collector = make_collector(config, model, tokenizer, suite)
    generator = torch.Generator().manual_seed(config.run.seed)
    trajectories = collector.collect(tasks, copies, temperature=config.rollout.temperature,
                                     generator=generator)
    return list(VerifierTracer(suite.make_env).trace(trajectories))


def run_audit(config, split: str | None, copies: int, checkpoint: Path | None = None,
              echo=print) -> dict[str, AuditRow]:
    """Audit the interface of ``config.env`` on the tasks of ``split`` (default: the
    environment's first validation split); prints the table."""
    from agentcredit.train.build import check_device
    from agentcredit.train.env_suites import build_env_suite, suite_splits

    known = suite_splits(config.env.name)
    if split is not None and split not in known:
        raise ConfigError(f"--split {split!r}: {config.env.name} has the splits "
                          f"{', '.join(known)}")
    if checkpoint is not None:  # the policy is audited last: refuse its device first
        check_device(config)
    suite = build_env_suite(config.env)
    split = split or suite.validation_splits[0]
    tasks = suite.tasks(split)
    env = suite.make_env()
    rows = {}
    for source in ("expert", "random"):
        traces = scripted_traces(env, tasks, source, copies, config.rollout.max_steps,
                                 config.run.seed)
        rows[source] = interface_audit(traces)
    if checkpoint is not None:
        rows["policy"] = interface_audit(policy_traces(config, checkpoint, tasks, copies))
    echo(f"VICT interface audit: env {config.env.name}, split {split}, {len(tasks)} tasks, "
         f"{copies} rollouts per task and source")
    echo(format_audit_table(rows))
    return rows
