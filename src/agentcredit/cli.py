"""The ``agentcredit`` command line (docs/design.md, "cli.py").

    agentcredit train [--config FILE] [--model NAME_OR_DIR] [key=value ...]
    agentcredit train --resume RUN_DIR [key=value ...]
    agentcredit eval --checkpoint PATH [--config FILE] [key=value ...]
    agentcredit audit [--env NAME] [--checkpoint PATH] [--split S] [--copies N] [key=value ...]
    agentcredit config --show [--config FILE] [--model NAME_OR_DIR] [key=value ...] | --list
    agentcredit report RUN_DIR [RUN_DIR ...] [-o report.html] [--viewer-mb MB]
    agentcredit credit-check --checkpoint PATH [--methods M,...] [--groups G] [key=value ...]

The help texts below are what a user reads first; they are plain text, and
listing the names must not import torch (``--help`` loads neither torch nor the
ALFWorld engine), so they come from the registries' torch-free lists:
``envs.suites.env_suite_names``, ``plugins.listed_estimator_names``,
``config.METHODS`` and ``train.evaluation.eval_modes.EVAL_MODES``.

A user error (a bad config, a missing file, an unusable run directory, a folder
that cannot be written) prints one ``error:`` line and exits with status 2; an
unexpected exception prints one ``error: internal error:`` line and exits with
status 1, or its traceback with ``--debug``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import traceback
import typing
from pathlib import Path

from agentcredit.config import ConfigError
from agentcredit.error_text import NO_MESSAGE, first_line

#: settings a resumed run may change: how long it runs, how often it evaluates and saves, where
#: it runs and what it records on the side; everything else would make the resumed updates a
#: different run from the logged ones
RESUME_SAFE_KEYS = ("run.updates", "run.eval_every", "run.checkpoint_every",
                    "run.keep_checkpoints", "run.progress", "run.threads", "run.device",
                    "run.save_rollouts", "run.keep_rollouts", "run.tensorboard", "run.wandb",
                    "eval.probes")

SETTINGS_HELP = "dotted settings such as rollout.group_size=4 (see below)"


def overrides_help() -> str:
    """The settings, methods and errors part of every command's help; the environments and
    estimators include the plug-ins (``plugins.py``) by name, without importing them, and the
    presets are the ``METHODS`` that are not estimators."""
    from agentcredit.config import METHOD_ALIASES, METHODS
    from agentcredit.envs.suites import env_suite_names  # the registry: no torch
    from agentcredit.plugins import listed_estimator_names

    estimators = listed_estimator_names()
    presets = [name for name in METHODS if name not in estimators]
    aliases = ", ".join(f"{name} is also spelled {alias}" for alias, name in METHOD_ALIASES.items())
    return OVERRIDES_HELP.format(
        envs=textwrap.fill(", ".join(env_suite_names()), 76, subsequent_indent="  "),
        estimators=_indented("estimators: " + ", ".join(estimators)),
        presets=_indented(f"presets: {', '.join(presets)} ({aliases})"))


def _indented(text: str) -> str:
    """``text`` wrapped at 78 columns, indented by 2 and its later lines by 4."""
    return textwrap.fill(text, 78, initial_indent="  ", subsequent_indent="    ")


OVERRIDES_HELP = """\
settings (key=value):
  After its options every command takes dotted settings that change one field
  of the run config, for example rollout.group_size=4 or optim.lr=1e-4.
  Values are read as YAML (true, 1e-4, [valid_seen]). model=DIR is short for
  model.name=DIR. env=NAME picks the environment, one of:
  {envs};
  its options are under its own key, for example
  env.alfworld.generator.max_receptacles=6 or env.tau.max_tasks=10 (both tau
  domains). Without --config the embedded default is the starting point
  (the tiny model on generated ALFWorld games, on the CPU).
  "agentcredit config --list" prints every key with its type and what it does;
  "agentcredit config --show [key=value ...]" prints the config they give.

methods (method=NAME sets a method's settings; later key=value settings win):
{estimators}
{presets}

errors:
  A bad setting, a missing file or an unusable run directory prints one
  "error:" line and exits with status 2. An unexpected failure prints one
  "error: internal error:" line and exits with status 1; add --debug to see
  its traceback.
"""

MAIN_EXAMPLES = """\
examples:
  agentcredit train --config quick              # a small run of every phase
  agentcredit report runs/quick -o report.html
  agentcredit train                             # the embedded default
  agentcredit train method=vict credit.options.backbone=gigpo \\
      run.name=vict_gigpo
  agentcredit train --config hf --model Qwen/Qwen2.5-1.5B-Instruct
  agentcredit train --resume runs/quick run.updates=6
  agentcredit eval --checkpoint runs/quick      # its newest checkpoint
  agentcredit audit --env alfworld --copies 4
  agentcredit config --show method=vict rollout.group_size=4
  agentcredit config --list
"""

TRAIN_EXAMPLES = """\
examples:
  agentcredit train
  agentcredit train method=adrs credit.options.backbone=gigpo \\
      credit.options.gate=L3
  agentcredit train --config my_run.yaml rollout.group_size=4 run.name=g4
  agentcredit train --resume runs/embedded run.updates=200

resuming:
  --resume continues a run from its newest usable checkpoint with the run's own
  config.yaml. It accepts only settings that keep the run's meaning:
{safe}.
  Any other change (the model, SFT, environment, rollout, credit or optimiser
  settings, the seed) is refused: start a new run with another run.name instead.
""".format(safe=textwrap.fill(", ".join(RESUME_SAFE_KEYS), 78, initial_indent="  ",
                              subsequent_indent="  "))

EVAL_EXAMPLES = """\
examples:
  agentcredit eval --checkpoint runs/embedded   # its newest checkpoint
  agentcredit eval --checkpoint runs/embedded/checkpoints/update_00010
  agentcredit eval --checkpoint runs/embedded/reference method=skill_prompt
  agentcredit eval --checkpoint path/to/model_folder --config my_run.yaml
  agentcredit eval --checkpoint path/to/model_folder --mode reflexion \\
      --trials 10 rollout.max_new_tokens=256

Inside a run (a run directory, one of its checkpoints, its reference/) the
run's config.yaml is used, else the embedded default or --config. The
evaluation is seeded for the model's update, so evaluating a run's checkpoint
repeats the eval line the run logged for that update. The result is written as
JSON: eval.json in the checkpoint folder, else eval_NAME.json beside the model
folder NAME (eval_react.json, eval_NAME_reflexion.json, ... with --mode).

--mode react and --mode reflexion are the prompting baselines: the model reasons
in <think> before each <action> (free decoding); reflexion gives each task up to
--trials trials, each failed one followed by a reflection, the last 3 kept in
the prompt, a trial ending when an action repeats.
"""

AUDIT_EXAMPLES = """\
examples:
  agentcredit audit --env alfworld --copies 4
  agentcredit audit --env webshop --split valid
  agentcredit audit --checkpoint runs/embedded  # also the policy's rollouts

The audit traces expert, random and (with --checkpoint) policy rollouts
through the tasks' verifiers and prints one row per source (VICT interface
audit, docs/vict.md section 4.9), its progress on stderr. --checkpoint takes
the same paths as eval.

columns (also printed under the table):
"""

CONFIG_EXAMPLES = """\
examples:
  agentcredit config --show                     # the embedded default
  agentcredit config --show method=vict rollout.group_size=4
  agentcredit config --show --config hf --model path/to/model_folder
  agentcredit config --show --config my_run.yaml > resolved.yaml
  agentcredit config --list

--show prints every key, each estimator option included, as the run would use
it; the file it writes loads again with --config.
"""


REPORT_EXAMPLES = """\
examples:
  agentcredit report runs/embedded              # one run
  agentcredit report /tmp/learn/runs -o learning.html   # every run in a folder
  agentcredit report runs/grpo_seed0 runs/vict_seed0 --viewer-mb 20

The page is one HTML file that opens offline: learning curves (mean over
seeds with a band), success and AUC per method and task type, the VICT
audit, the ledger, the timing of an update, and a rollout viewer for runs
trained with run.save_rollouts=K. Runs named METHOD_seedN are grouped by
METHOD. A run still training is shown as far as it has got; a missing or
damaged file is named on the page. Needs the report extra:
pip install 'agentcredit[report]'. See docs/report.md.
"""

CREDIT_CHECK_EXAMPLES = """\
examples:
  agentcredit credit-check --checkpoint runs/embedded/reference
  agentcredit credit-check --checkpoint runs/embedded --methods grpo,vict,adrs \\
      --groups 32 --truths solver
  agentcredit credit-check --checkpoint runs/embedded --mc-groups 4 \\
      --continuations 8 -o credit.json

Collects --groups task groups with the model the way the trainer does, runs
every method on that same batch and scores each one's step credit against
the truths: solver (regret against the environment's solver, ALFWorld's
demonstrator) and mc (the policy's own advantage by Monte Carlo
continuations from the replayed states, on the first --mc-groups groups).
Prints Spearman and sign-agreement metrics with 95% intervals over groups,
and paired differences against each method's backbone and random_edges;
writes them as JSON. See docs/credit_check.md.
"""


CONFORMANCE_EXAMPLES = """\
examples:
  agentcredit conformance grpo
  agentcredit conformance my_estimator --seed 3
  agentcredit conformance --env lamps env.lamps.lamps=6

With NAME, runs the estimator on generated batches (varied group sizes and
lengths, constant and mixed groups, ties) and prints one line per check:
finite and shaped output, only the declared inputs read, deterministic, and
the properties the estimator claims (step_credit, constant_group_zero,
permutation, returns_only, turn_baseline). With --env NAME, plays a few short
episodes of the environment's first train tasks and checks the suite, the
environment protocol, observations, rewards in [0, 1], bad actions, the
expert and the verifier's atoms, naming the field and the rule of each
problem. Exits with status 1 when a check fails, 2 for a usage error. From
pytest: agentcredit.testing.assert_conforms("NAME"). See docs/extending.md.
"""


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written; option help wrapped, never at a name's hyphen
    (``tau-retail``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors follow the CLI's rule: one ``error:`` line on
    stderr, exit 2 (argparse's own prints the usage block first, then ``PROG: error:``)."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    """The ``agentcredit`` parser: the global options, then one subcommand each, its summary and
    examples here and its arguments in its ``_*_arguments`` function below."""
    from importlib.metadata import version

    from agentcredit.envs.suites import env_suite_names  # the registry: no torch
    from agentcredit.train.evaluation.audit import audit_legend  # torch-free, as envs.suites

    settings_help = overrides_help()
    envs = ", ".join(env_suite_names())
    parser = _Parser(
        prog="agentcredit", formatter_class=_HelpFormatter,
        epilog=MAIN_EXAMPLES + "\n" + settings_help,
        description="Reinforcement learning for multi-turn LLM agents that gives every\n"
                    "action the credit it earned (VICT and ADRS on the GRPO, RLOO and\n"
                    "GiGPO backbones).")
    parser.add_argument("--version", action="version",
                        version=f"agentcredit {version('agentcredit')}")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an unexpected error")
    # --debug after the command too; SUPPRESS keeps the subcommand from resetting it
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an unexpected error")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, examples: str,
                settings: bool = True) -> argparse.ArgumentParser:
        epilog = examples + "\n" + settings_help if settings else examples  # report: none
        return commands.add_parser(name, help=summary, description=summary[0].upper()
                                   + summary[1:] + ".", epilog=epilog,
                                   formatter_class=_HelpFormatter, parents=[common])

    _train_arguments(command("train", "train a policy (SFT warm start, then RL)",
                             TRAIN_EXAMPLES))
    _eval_arguments(command("eval", "evaluate a model on the validation splits", EVAL_EXAMPLES))
    _audit_arguments(command("audit", "print the VICT verifier-interface audit",
                             AUDIT_EXAMPLES + audit_legend() + "\n"), envs)
    _config_arguments(command("config", "show the resolved config or list every key",
                              CONFIG_EXAMPLES))
    _credit_check_arguments(command("credit-check", "score every method's credit against the "
                                    "true value of each action", CREDIT_CHECK_EXAMPLES), envs)
    _conformance_arguments(command("conformance", "check an estimator or an environment "
                                   "against its conformance suite", CONFORMANCE_EXAMPLES), envs)
    _report_arguments(command("report", "write an HTML report of runs: curves, tables and a "
                              "credit viewer", REPORT_EXAMPLES, settings=False))
    return parser


def _overrides_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument("overrides", nargs="*", metavar="key=value", help=SETTINGS_HELP)


def _train_arguments(train: argparse.ArgumentParser) -> None:
    train.add_argument("--config", help="YAML run config (default: the embedded default)")
    train.add_argument("--model", help="hub id or model folder (same as model.name=...)")
    train.add_argument("--resume", metavar="RUN_DIR",
                       help="continue the run in RUN_DIR from its newest usable checkpoint")
    train.add_argument("--overwrite", action="store_true",
                       help="delete what an earlier run left in the run directory first")
    _overrides_argument(train)


def _eval_arguments(evaluate: argparse.ArgumentParser) -> None:
    from agentcredit.train.evaluation.eval_modes import EVAL_MODES  # its names: no torch

    evaluate.add_argument("--checkpoint", required=True, metavar="PATH",
                          help="a run directory (its newest checkpoint), a checkpoint folder, "
                               "RUN/reference or a model folder")
    evaluate.add_argument("--config", help="YAML config (default: the run's, else the "
                                           "embedded default)")
    evaluate.add_argument("--mode", choices=EVAL_MODES, default="standard",
                          help="standard (the run's own prompts), react or reflexion")
    evaluate.add_argument("--trials", type=int, default=10,
                          help="reflexion: trials per task (default 10)")
    _overrides_argument(evaluate)


def _audit_arguments(audit: argparse.ArgumentParser, envs: str) -> None:
    audit.add_argument("--env", help=f"environment name: {envs} "
                                     "(default: the run's, else the config's)")
    audit.add_argument("--checkpoint", metavar="PATH",
                       help="also audit rollouts of this model (a run directory, checkpoint "
                            "folder, RUN/reference or model folder)")
    audit.add_argument("--split", help="task split (default: the environment's first "
                                       "validation split, e.g. valid_seen or valid)")
    audit.add_argument("--copies", type=int, default=4,
                       help="rollouts per task and source (default 4)")
    audit.add_argument("--config", help="YAML config (default: the run's, else the embedded "
                                        "default)")
    _overrides_argument(audit)


def _config_arguments(config: argparse.ArgumentParser) -> None:
    what = config.add_mutually_exclusive_group(required=True)
    what.add_argument("--show", action="store_true",
                      help="print the config that --config and the key=value settings give, "
                           "as YAML")
    what.add_argument("--list", action="store_true",
                      help="print every key with its type and what it does")
    config.add_argument("--config", help="YAML config (default: the embedded default)")
    config.add_argument("--model", help="hub id or model folder (same as model.name=...)")
    _overrides_argument(config)


def _credit_check_arguments(check: argparse.ArgumentParser, envs: str) -> None:
    check.add_argument("--checkpoint", required=True, metavar="PATH",
                       help="a run directory (its newest checkpoint), a checkpoint folder, "
                            "RUN/reference or a model folder")
    check.add_argument("--env", help=f"environment name: {envs} "
                                     "(default: the run's, else the config's)")
    check.add_argument("--methods", help="comma-separated NAME[/BACKBONE] list, e.g. "
                                         "grpo,vict,vict/gigpo (default: every estimator the "
                                         "environment can serve; ADRS needs skill texts, "
                                         "skills.root=DIR)")
    check.add_argument("--groups", type=int, default=16,
                       help="task groups to collect (default 16; at most 10,000, and the "
                            "rollouts they hold estimated against this machine's memory first)")
    check.add_argument("--truths", help="solver, mc or both (default: both where the "
                                        "environment has a solver, else mc)")
    check.add_argument("--mc-groups", type=int, default=4,
                       help="groups the Monte Carlo truth covers (default 4; 0: all)")
    check.add_argument("--continuations", type=int, default=8,
                       help="Monte Carlo continuations per state (default 8)")
    check.add_argument("--tie-breaks", type=int, default=4,
                       help="solver tie-breaks averaged over (default 4)")
    check.add_argument("--token-steps", type=int, default=0,
                       help="steps the token-level truth covers (within-step ρ of token "
                            "credit; free decoding; default 0: off)")
    check.add_argument("--boots", type=int, default=1000,
                       help="bootstrap draws over groups (default 1000)")
    check.add_argument("--workers", type=int, default=1,
                       help="2: the solver truth in a second process beside the Monte Carlo "
                            "truth (default 1)")
    check.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    check.add_argument("--split", default="train", help="task split (default train)")
    check.add_argument("-o", "--output", default="credit_check.json",
                       help="the JSON file to write, in a folder that exists; never through a "
                            "link (default: credit_check.json)")
    check.add_argument("--config", help="YAML config (default: the run's, else the embedded "
                                        "default)")
    _overrides_argument(check)


def _conformance_arguments(conformance: argparse.ArgumentParser, envs: str) -> None:
    conformance.add_argument("name", metavar="NAME", nargs="?",
                             help="a registered estimator (or --env NAME)")
    conformance.add_argument("--env", metavar="NAME",
                             help=f"check this registered environment instead: {envs}")
    conformance.add_argument("--seed", type=int, default=0,
                             help="seed of the generated batches or of the environment's "
                                  "random actions (default 0)")
    conformance.add_argument("overrides", nargs="*", metavar="key=value",
                             help="credit.options.KEY=VALUE settings of the estimator's config, "
                                  "or env.* settings of the environment's")


def _report_arguments(report: argparse.ArgumentParser) -> None:
    report.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                        help="a run directory, or a folder of run directories (a benchmark's "
                             "--output-dir)")
    report.add_argument("-o", "--output", default="report.html",
                        help="the HTML file to write, in a folder that exists; never through a "
                             "link (default: report.html)")
    report.add_argument("--viewer-mb", type=float, default=8.0,
                        help="MB of saved rollouts the viewer may embed, shared by the runs "
                             "(default 8; 0 leaves the viewer out)")
    report.set_defaults(overrides=[])  # main() adds the left-over arguments to it


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agentcredit`` script; returns the exit status."""
    from agentcredit.plugins import PluginError

    try:
        parser = _parser()  # it lists the environments, so it loads their plug-ins
    except PluginError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    # overrides may come before or after options: collect the ones argparse left over
    args, extra = parser.parse_known_args(argv)
    unknown = [arg for arg in extra if arg.startswith("-") or "=" not in arg]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.overrides = [*args.overrides, *extra]
    try:
        if args.command == "config":
            return _config(args)
        if args.command == "report":
            return _write_report(args)
        if args.command == "conformance":
            return _conformance(args)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # one bar per checkpoint save/load would drown the run's
        if args.command == "train":
            return _train(args)
        if args.command == "audit":
            return _audit(args)
        if args.command == "credit-check":
            return _credit_check(args)
        return _eval(args)
    except KeyboardInterrupt as stop:
        print(str(stop) or "interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader has gone (`config --list | head`): nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 0
    except Exception as err:  # noqa: BLE001  (every failure ends as one line, or --debug)
        return _report(err, args.debug)


def _report(err: Exception, debug: bool) -> int:
    """Print ``err`` as one ``error:`` line (a traceback first with ``--debug`` where it helps);
    the exit status: 2 for what the user can fix, 1 for a bug."""
    from agentcredit.run.directory import RunDirectoryError

    if isinstance(err, ConfigError | RunDirectoryError):
        print(f"error: {first_line(err, NO_MESSAGE)}", file=sys.stderr)
        return 2
    if debug:
        traceback.print_exception(err, file=sys.stderr)
    if isinstance(err, OSError):
        if err.filename is None:  # ours: the message says what to do
            print(f"error: {first_line(err, NO_MESSAGE)}", file=sys.stderr)
        else:
            print(f"error: cannot use {err.filename}: "
                  f"{err.strerror or first_line(err, NO_MESSAGE)}; check that the path is right, "
                  "writable and its disk has free space", file=sys.stderr)
        return 2
    if not debug:
        print(f"error: internal error: {type(err).__name__}: {first_line(err, NO_MESSAGE)} "
              "(rerun with --debug for the traceback)", file=sys.stderr)
    return 1


def _train(args) -> int:
    from agentcredit.config import load_config
    from agentcredit.jsonl_log import read_jsonl
    from agentcredit.train.evaluation.outcomes import success_report
    from agentcredit.train.loop import train

    overrides = list(args.overrides)
    if args.model:
        overrides.insert(0, f"model.name={args.model}")
    if args.resume:
        config = _resume_config(args, overrides)
    else:
        config = load_config(args.config, overrides)
    if config.rollout.group_size == 1 and config.run.updates > 0:
        print("warning: rollout.group_size = 1 gives every group-relative advantage 0; nothing "
              "trains", file=sys.stderr)
    result = train(config, resume=bool(args.resume), overwrite=args.overwrite)
    evaluations = [record for record in read_jsonl(result.run_dir / "metrics.jsonl")
                   if record.get("kind") == "eval"]
    print("\n".join(success_report(evaluations, sft=config.sft.enabled)))
    return 0


def _resume_config(args, overrides: list[str]):
    """The resumed run's config: its ``config.yaml`` plus the overrides ``RESUME_SAFE_KEYS``
    allow (each said in one line); any other change is refused in one line."""
    from agentcredit.config import changed_keys, load_config

    run_dir = Path(args.resume)
    if args.config:
        raise ConfigError(f"--config cannot be used with --resume: a resumed run keeps "
                          f"{run_dir / 'config.yaml'}; give changes as key=value")
    if args.overwrite:
        raise ConfigError("--overwrite cannot be used with --resume: resuming keeps the run, "
                          "--overwrite deletes it; choose one")
    from agentcredit.run.safe_files import refusal

    if refusal(run_dir / "config.yaml"):  # a link or a FIFO: never read, never rewritten
        raise ConfigError(f"--resume {run_dir}: {refusal(run_dir / 'config.yaml')}")
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"--resume {run_dir}: no config.yaml there, so it is not a run "
                          "directory")
    where = [f"run.output_dir={run_dir.parent}", f"run.name={run_dir.name}"]  # it may have moved
    saved = load_config(run_dir / "config.yaml", where)
    config = load_config(run_dir / "config.yaml", [*where, *overrides])
    changes = changed_keys(saved, config)
    refused = [key for key in changes if key not in RESUME_SAFE_KEYS]
    if refused:
        listed = ", ".join(f"{key} ({_show(changes[key][0])} -> {_show(changes[key][1])})"
                           for key in refused)
        raise ConfigError(f"--resume {run_dir} refuses {listed}: they change what the run "
                          "means; start a new run (another run.name=...) to change them. "
                          f"Resume accepts only {', '.join(RESUME_SAFE_KEYS)}")
    for key, (old, new) in changes.items():
        print(f"resume: accepted {key}={_show(new)} (was {_show(old)})")
    return config


def _show(value) -> str:
    """A config value as the user would type it after ``key=``."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value)


def _eval(args) -> int:
    import dataclasses

    from agentcredit.config import load_config
    from agentcredit.train.evaluation.eval_modes import ReflexionConfig, evaluate_model_mode
    from agentcredit.train.evaluation.evaluate import (
        check_result_folder,
        evaluate_model,
        locate_model,
        write_eval_result,
    )

    if args.trials < 1:
        raise ConfigError(f"--trials {args.trials}: reflexion needs at least 1 trial per task")
    source = locate_model(args.checkpoint)
    if args.mode != "standard":  # the prompting baselines write beside the standard result
        source = dataclasses.replace(source, result=source.result.with_name(
            f"{source.result.stem}_{args.mode}.json"))
    check_result_folder(source)  # a link where the result goes is refused before the work
    config_path = args.config or source.run_config
    config = load_config(config_path, [*args.overrides])
    print(f"evaluating {source.describe()}" + (f" in {args.mode} mode"
                                                if args.mode != "standard" else ""))
    print(f"config: {config_path or 'the embedded default'}"
          + (f" with {' '.join(args.overrides)}" if args.overrides else ""))
    if args.mode == "standard":
        metrics = evaluate_model(config, source.model_dir, update=source.update or 0)
    else:
        metrics = evaluate_model_mode(config, source.model_dir, source.update or 0, args.mode,
                                      ReflexionConfig(trials=args.trials))
    written = write_eval_result(source, metrics, config=str(config_path) if config_path else None,
                                overrides=list(args.overrides), mode=args.mode)
    print(json.dumps(metrics, indent=1))
    print(f"success: {metrics['eval/success']:.3f} ({source.describe()})")
    print(f"wrote {written}")
    return 0


def _audit(args) -> int:
    from agentcredit.config import load_config
    from agentcredit.progress import reporting
    from agentcredit.train.evaluation.audit import run_audit
    from agentcredit.train.evaluation.evaluate import locate_model

    if args.copies < 1:
        raise ConfigError(f"--copies {args.copies}: need at least 1 rollout per task")
    # the model is found (or refused) before the expert and random audits run
    source = locate_model(args.checkpoint) if args.checkpoint else None
    config_path = args.config or (source.run_config if source else None)
    env = [f"env={args.env}"] if args.env else []
    config = load_config(config_path, [*env, *args.overrides])
    if source is not None:
        print(f"policy: {source.describe()}")
    with reporting(config.run.progress):
        run_audit(config, args.split, args.copies, source.model_dir if source else None)
    return 0


def _credit_check(args) -> int:
    from agentcredit.disk_full import writing
    from agentcredit.envs.base import ReplayMismatch
    from agentcredit.run.safe_files import output_refusal, write_output
    from agentcredit.train.evaluation.credit_check.check import (
        CreditCheckOptions,
        run_credit_check,
    )
    from agentcredit.train.evaluation.credit_check.metrics import format_table
    from agentcredit.train.evaluation.evaluate import locate_model

    try:
        options = CreditCheckOptions(
            methods=args.methods.split(",") if args.methods else None,
            groups=args.groups, truths=args.truths.split(",") if args.truths else None,
            mc_groups=args.mc_groups,
            continuations=args.continuations, tie_breaks=args.tie_breaks, boots=args.boots,
            seed=args.seed, split=args.split, token_steps=args.token_steps,
            workers=args.workers)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    source = locate_model(args.checkpoint)
    output = Path(args.output)
    within = [source.run_dir] if source.run_dir is not None else []
    if why := output_refusal(output, within):  # before the work, and again at the write
        raise ConfigError(f"-o {output}: {why}")
    env = [f"env={args.env}"] if args.env else []
    print(f"credit check of {source.describe()}")
    try:
        result = run_credit_check(args.config or source.run_config, [*env, *args.overrides],
                                  source.model_dir, options)
    except (ValueError, KeyError, ReplayMismatch) as err:
        raise ConfigError(err.args[0] if isinstance(err, KeyError) else str(err)) from None
    print(format_table(result.table), end="")
    if why := output_refusal(output, within):
        raise ConfigError(f"-o {output}: {why}")
    with writing(output):
        write_output(output, (json.dumps({"model": str(source.model_dir), **result.to_dict()},
                                         indent=1) + "\n").encode())
    print(f"wrote {output}")
    return 0


def _conformance(args) -> int:
    from agentcredit.config import load_config
    from agentcredit.config.sections import estimator_config
    from agentcredit.credit import estimator_names
    from agentcredit.envs.suites import env_suite_names
    from agentcredit.testing import check_estimator
    from agentcredit.testing.env_conformance import check_environment

    if args.name is not None and "=" in args.name:  # a setting argparse took for NAME
        args.overrides, args.name = [args.name, *args.overrides], None
    if (args.name is None) == (args.env is None):
        raise ConfigError("conformance checks an estimator (conformance NAME) or an environment "
                          "(conformance --env NAME): give exactly one of them")
    if args.env is not None:
        if args.env not in env_suite_names():
            raise ConfigError(f"unknown environment {args.env!r}; registered: "
                              f"{', '.join(env_suite_names())}")
        config = load_config(None, [f"env={args.env}", *args.overrides])
        report = check_environment(args.env, config.env.build_suite, seed=args.seed)
        print(f"played train tasks {', '.join(report.tasks) or '(none)'}")
    else:
        if args.name not in estimator_names():
            raise ConfigError(f"unknown estimator {args.name!r}; registered: "
                              f"{', '.join(estimator_names())}")
        config = load_config(None, [f"credit.estimator={args.name}", *args.overrides])
        report = check_estimator(args.name, estimator_config(config.credit), seed=args.seed)
    print("\n".join(report.lines()))
    print(f"{args.name or args.env}: {'conforms' if report.ok else 'FAILS'} "
          f"({len(report.checks)} checks, {len(report.failures)} failures)")
    return 0 if report.ok else 1


def _write_report(args) -> int:
    settings = [arg for arg in [*args.run_dirs, *args.overrides]
                if "=" in arg and not Path(arg).exists()]
    if settings:
        raise ConfigError(f"report takes no key=value settings ({settings[0]}): it shows each "
                          "run as its config.yaml says; pass run directories only")
    try:
        from agentcredit.report.aggregate import counted
        from agentcredit.report.page import ReportError, write_report
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] != "plotly":
            raise
        print("error: agentcredit report draws its plots with Plotly, which is not installed: "
              "pip install 'agentcredit[report]'", file=sys.stderr)
        return 2
    try:
        result = write_report(args.run_dirs, args.output, viewer_mb=args.viewer_mb)
    except ReportError as err:
        print(f"error: {first_line(err, NO_MESSAGE)}", file=sys.stderr)
        return 2
    for problem in result.problems:
        print(f"warning: {problem}", file=sys.stderr)
    print(f"wrote {result.path} ({counted(result.runs, 'run')} of "
          f"{counted(result.methods, 'method')}, {result.size_bytes / 1e6:.1f} MB, "
          f"{result.seconds:.1f} s)")
    return 0


def _config(args) -> int:
    import yaml

    from agentcredit.config import config_to_dict, estimator_config, load_config, to_dict

    if args.show:
        model = [f"model.name={args.model}"] if args.model else []
        config = load_config(args.config, [*model, *args.overrides])
        data = config_to_dict(config)
        data["credit"]["options"] = to_dict(estimator_config(config.credit))  # every option
        print(yaml.safe_dump(data, sort_keys=False), end="")
        return 0
    if args.overrides or args.config or args.model:
        raise ConfigError("config --list lists every key and takes no --config, --model or "
                          "key=value; use config --show for a resolved config")
    print("\n".join(_key_lines()))
    return 0


def _key_lines() -> list[str]:
    """One line per config key, ``key  type  doc``, then each estimator's options."""
    from agentcredit.config import TrainConfig
    from agentcredit.credit import estimator_names, get_estimator

    lines = _columns(_key_rows(TrainConfig, ""))
    for name in estimator_names():
        options = _key_rows(get_estimator(name).config_cls, "credit.options.")
        lines += ["", f"credit.options with credit.estimator={name} (or method={name}):"]
        lines += _columns(options) or ["  (no options)"]
    return lines


def _key_rows(cls: type, prefix: str) -> list[tuple[str, str, str]]:
    """``(key, type and range, doc)`` of every key of the config dataclass ``cls``
    (``int [1, 1024]``; a side without a bound says why), a selectable field's members' keys
    after it (``credit.options.backbone.mode``)."""
    import dataclasses

    from agentcredit.config import leaf_keys, selectable
    from agentcredit.config.schema import allowed_range

    attributes = _attribute_docs(cls)  # some configs document fields in their docstrings
    unbounded = getattr(cls, "_unbounded", {})
    rows = []
    for key, hint, doc in leaf_keys(cls, prefix):
        field = key[len(prefix):]
        if "." in field:
            continue  # a nested section's keys: from its own class, below
        kind = " ".join(filter(None, (_type_name(hint), allowed_range(cls, field))))
        doc = doc or attributes.get(field, "")
        if field in unbounded:
            doc += f" Unbounded: {unbounded[field]}."
        rows.append((key, kind, doc))
        if dataclasses.is_dataclass(hint):
            rows += _key_rows(hint, key + ".")
        for name, member in (selectable(hint) or {}).items():
            rows += [(sub, kind, f"(with {key}={name}) {text}")
                     for sub, kind, text in _key_rows(member, key + ".")]
    return rows


def _attribute_docs(cls: type) -> dict[str, str]:
    """Field docs from a Google-style class docstring (``    name: text`` under a section
    header such as ``Attributes:``), field name → its text on one line."""
    import dataclasses
    import inspect
    import re

    fields = {f.name for f in dataclasses.fields(cls)}
    docs, name = {}, None
    for line in inspect.cleandoc(cls.__doc__ or "").splitlines():
        entry = re.match(r" {4}(\w+): (.*)", line)
        if entry and entry[1] in fields:
            name = entry[1]
            docs[name] = entry[2]
        elif name and line.startswith(" " * 5):
            docs[name] += " " + line.strip()
        else:
            name = None
    return docs


def _columns(rows: list[tuple[str, str, str]]) -> list[str]:
    if not rows:
        return []
    width = max(len(key) for key, _, _ in rows)
    kind = max(len(name) for _, name, _ in rows)
    return [f"{key:<{width}}  {name:<{kind}}  {doc.replace('``', '')}".rstrip()
            for key, name, doc in rows]


def _type_name(hint) -> str:
    """A type hint in words: ``int``, ``bare|tagged``, ``section``, ``grpo|rloo|gigpo``."""
    import dataclasses

    from agentcredit.config import selectable

    if dataclasses.is_dataclass(hint):
        return "section"
    choices = selectable(hint)
    if choices is not None:
        return "name: " + "|".join(choices)
    if typing.get_origin(hint) is typing.Literal:
        return "|".join(map(str, typing.get_args(hint)))
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")


if __name__ == "__main__":
    raise SystemExit(main())
