"""The VICT interface audit (VICT paper Table 5; docs/vict.md §4.9) behind ``agentcredit audit``.

Rollouts come from three sources, each traced through the tasks' verifiers and
audited as one row: the expert's plan, uniformly random admissible actions, and,
given a checkpoint, the policy itself (sampled at the rollout temperature).
Every row reports atoms per task, reconstruction %, mutation conformance %,
eligibility pass %, proof coverage % and abstention % (of rollouts, and per fact with the
whole-group ties apart), then the atoms' Level-0/1/2
instrumentation mix, the share flagged irreversible and the (rollout, atom) pairs that
broke that flag (VICT paper appendix C and Table 9; docs/vict.md §4.1, §4.9).
"""

from __future__ import annotations

import random
import textwrap
from collections.abc import Sequence
from pathlib import Path

from agentcredit.config import ConfigError
from agentcredit.progress import Progress

#: what each column of the audit table means (``agentcredit audit --help`` and the output's
#: footer); torch-free, so that ``--help`` stays light
AUDIT_LEGEND = (
    ("rollouts", ("where the rollouts came from: the expert's plan, random admissible actions, "
                  "or the policy (--checkpoint)")),
    ("n", "rollouts audited (tasks × --copies)"),
    ("atoms/task", "verifier atoms per task"),
    ("recon. %", "rollouts whose score rebuilt from the atoms, F, equals the verifier's V"),
    ("mutation %", "mutants (the final state edited to flip one fact) where F still equals V"),
    ("elig. pass %", "non-zero corrections that pass VICT's eligibility rules (must be 100)"),
    ("proof cov. %", "atoms with a non-zero value that have a valid proof edge to a step"),
    ("abstain %", "rollouts VICT gives no correction (it keeps the backbone's advantage)"),
    ("top abstention reason", ("the most frequent reason: tie (the task's rollouts all scored "
                               "alike), non_conforming, budget, no_edge or terminal_only")),
    ("fact abstain %", ("(rollout, atom) facts with a non-zero normalised marginal that VICT "
                        "would credit but cannot: no proof edge, a terminal-only atom, or the "
                        "rollout abstained before a core (non_conforming, budget, alone at its "
                        "group's median); the VICT paper's per-fact abstention")),
    ("top fact reason", "the most frequent reason a fact abstained"),
    ("whole-group tie %", ("rollouts of groups whose outcomes all tied, left out of the "
                           "per-fact figure")),
    ("L0 % / L1 % / L2 %", ("atoms instrumented at level 0 (a final-state difference), 1 (a "
                            "verifier branch or score term) or 2 (an adapter over observations "
                            "or history)")),
    ("irrev. %", "atoms flagged irreversible (once met, never unmet)"),
    ("irrev. breaks", ("(rollout, atom) pairs where an irreversible atom was unmet again (should "
                       "be 0)")),
)
#: the line after the table when every group holds one rollout
SINGLE_COPY_NOTE = ("note: with --copies 1 each task's group holds one rollout, so every group "
                    "is a tie and VICT abstains on all of them (abstain 100%, reason tie); use "
                    "--copies 2 or more to audit its corrections")


def audit_legend(width: int = 78) -> str:
    """``AUDIT_LEGEND`` as an indented list, each column's text wrapped to ``width``."""
    name = max(len(column) for column, _ in AUDIT_LEGEND)
    return "\n".join(textwrap.fill(text, width, initial_indent=f"  {column:<{name}}  ",
                                   subsequent_indent=" " * (name + 4))
                      for column, text in AUDIT_LEGEND)


def scripted_traces(env, tasks: Sequence, source: str, copies: int, max_steps: int, seed: int,
                    bar: Progress | None = None) -> list:
    """``copies`` traced rollouts (``RolloutTrace``) per task from ``source`` = ``expert`` or
    ``random``; ``bar`` counts the tasks done."""
    from agentcredit.verifier.closure import DependencyGraph
    from agentcredit.verifier.trace import trace_rollout

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
            admissible = [obs.admissible_actions]
            for t in range(len(plan) if plan is not None else max_steps):
                action = plan[t] if plan is not None else rng.choice(obs.admissible_actions)
                obs, _, done, info = env.step(action)
                observations.append(obs.text)
                snapshots.append(env.snapshot())
                actions.append(action)
                valid.append(info.valid)
                admissible.append(obs.admissible_actions)
                if done:
                    break
            traces.append(trace_rollout(verifier, observations, snapshots, actions, valid=valid,
                                        graph=graph, admissible=admissible))
        if bar is not None:
            bar.update(source=source)
    return traces


def policy_traces(config, checkpoint: Path, tasks: Sequence, copies: int) -> list:
    """``copies`` rollouts per task sampled from the policy in ``checkpoint``, traced."""
    import torch

    from agentcredit.train.build import load_model, make_collector
    from agentcredit.train.scoring.verifier_traces import VerifierTracer

    model, tokenizer = load_model(config, checkpoint)
    suite = config.env.build_suite()
    collector = make_collector(config, model, tokenizer, suite)
    generator = torch.Generator().manual_seed(config.run.seed)
    trajectories = collector.collect(tasks, copies, temperature=config.rollout.temperature,
                                     generator=generator)
    return list(VerifierTracer(suite.make_env).trace(trajectories))


def run_audit(config, split: str | None, copies: int, checkpoint: Path | None = None,
              echo=print) -> dict:
    """Audit the interface of ``config.env`` on the tasks of ``split`` (default: the
    environment's first validation split); prints the table, the legend of its columns and,
    with ``copies`` = 1, why every group abstains. Returns the ``AuditRow`` of each source."""
    from agentcredit.credit.vict import format_audit_table, interface_audit
    from agentcredit.envs.suites import suite_splits
    from agentcredit.train.build import check_device

    known = suite_splits(config.env.name)
    if split is not None and split not in known:
        raise ConfigError(f"--split {split!r}: {config.env.name} has the splits "
                          f"{', '.join(known)}")
    if checkpoint is not None:  # the policy is audited last: refuse its device first
        check_device(config)
    suite = config.env.build_suite()
    split = split or suite.validation_splits[0]
    tasks = suite.tasks(split)
    env = suite.make_env()
    rows = {}
    sources = 3 if checkpoint is not None else 2
    with Progress("audit", sources * len(tasks), unit="tasks", delay_s=0) as bar:
        for source in ("expert", "random"):
            traces = scripted_traces(env, tasks, source, copies, config.rollout.max_steps,
                                     config.run.seed, bar)
            rows[source] = interface_audit(traces)
        if checkpoint is not None:
            rows["policy"] = interface_audit(policy_traces(config, checkpoint, tasks, copies))
            bar.update(len(tasks), source="policy")
    echo(f"VICT interface audit: env {config.env.name}, split {split}, {len(tasks)} tasks, "
         f"{copies} rollouts per task and source")
    echo(format_audit_table(rows))
    echo("columns:\n" + audit_legend())
    if copies == 1:
        echo(SINGLE_COPY_NOTE)
    return rows
