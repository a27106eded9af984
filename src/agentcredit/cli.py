"""The ``agentcredit`` command line (docs/design.md, "cli.py").

    agentcredit train [--config FILE] [--model NAME_OR_DIR] [key=value ...]
    agentcredit train --resume RUN_DIR [key=value ...]
    agentcredit eval --checkpoint DIR [--config FILE] [key=value ...]
    agentcredit audit --env alfworld [--checkpoint DIR] [--split S] [--copies N] [key=value ...]

Without ``--config`` a run uses the packaged embedded default
(``configs/embedded.yaml``). Overrides use dotted keys (``rollout.group_size=4``;
``model=DIR`` is short for ``model.name=DIR``). ``method=NAME`` picks a method by
name (``train.config.METHODS``): any credit estimator (``grpo``, ``gigpo``, ``vict``,
``adrs`` …) or a privileged baseline of docs/adrs.md §5.6::

    agentcredit train method=adrs credit.options.backbone=gigpo credit.options.gate=L3
    agentcredit train method=sdar            # also: opsd, skill_grpo, skill_grpo_star
    agentcredit train method=skill_prompt    # no RL: the SFT policy, evaluated with skills
    agentcredit eval --checkpoint RUN_DIR method=skill_prompt   # or eval.skills=true

A bad config, a missing file (a skill text too) or an unusable run directory
prints one ``error:`` line and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentcredit.config_schema import ConfigError


def _parser() -> argparse.ArgumentParser:
    from importlib.metadata import version

    parser = argparse.ArgumentParser(prog="agentcredit", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version",
                        version=f"agentcredit {version('agentcredit')}")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train a policy (SFT warm start + RL)")
    train.add_argument("--config", help="YAML run config (default: the embedded default)")
    train.add_argument("--model", help="hub id or checkpoint directory (= model.name=...)")
    train.add_argument("--resume", metavar="RUN_DIR",
                       help="continue the run in RUN_DIR from its latest usable checkpoint")
    train.add_argument("--overwrite", action="store_true",
                       help="delete what an earlier run left in the run directory first")
    train.add_argument("overrides", nargs="*", metavar="key=value")

    evaluate = commands.add_parser("eval", help="evaluate a checkpoint on the validation splits")
    evaluate.add_argument("--checkpoint", required=True,
                          help="a checkpoint folder, a run directory (its latest checkpoint) "
                               "or a model directory")
    evaluate.add_argument("--config", help="YAML config (default: the run's, else embedded)")
    evaluate.add_argument("overrides", nargs="*", metavar="key=value")

    audit = commands.add_parser("audit", help="print the VICT verifier-interface audit")
    audit.add_argument("--env", required=True, help="environment name (e.g. alfworld)")
    audit.add_argument("--checkpoint", help="also audit rollouts of this model directory")
    audit.add_argument("--split", help="task split (default: the environment's first "
                                       "validation split, e.g. valid_seen or valid)")
    audit.add_argument("--copies", type=int, default=4,
                       help="rollouts per task and source (default 4)")
    audit.add_argument("--config", help="YAML config (default: the embedded default)")
    audit.add_argument("overrides", nargs="*", metavar="key=value")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agentcredit`` script; returns the exit status."""
    parser = _parser()
    # overrides may come before or after options: collect the ones argparse left over
    args, extra = parser.parse_known_args(argv)
    unknown = [arg for arg in extra if arg.startswith("-") or "=" not in arg]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.overrides = [*args.overrides, *extra]
    from transformers.utils import logging as hf_logging

    from agentcredit.train.run_dir import RunDirectoryError

    hf_logging.disable_progress_bar()  # one bar per checkpoint save/load would drown the run's
    try:
        if args.command == "train":
            return _train(args)
        if args.command == "audit":
            return _audit(args)
        return _eval(args)
    except (ConfigError, RunDirectoryError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        print(str(stop) or "interrupted", file=sys.stderr)
        return 130


def _train(args) -> int:
    from agentcredit.train.config import load_config
    from agentcredit.train.loop import train

    overrides = list(args.overrides)
    if args.model:
        overrides.insert(0, f"model.name={args.model}")
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").is_file():
            raise ConfigError(f"--resume {run_dir}: no config.yaml there, so it is not a run "
                              "directory")
        overrides = [f"run.output_dir={run_dir.parent}", f"run.name={run_dir.name}", *overrides]
        config = load_config(run_dir / "config.yaml", overrides)
    else:
        config = load_config(args.config, overrides)
    result = train(config, resume=bool(args.resume), overwrite=args.overwrite)
    print(f"run directory: {result.run_dir.resolve()}")
    print(f"success before RL (after SFT): {_fmt(result.success_start)}")
    print(f"success after {result.updates_done} updates: {_fmt(result.success_end)}")
    return 0


def _eval(args) -> int:
    from agentcredit.train.config import load_config
    from agentcredit.train.evaluate import evaluate_model
    from agentcredit.train.run_dir import RunDirectory

    path = Path(args.checkpoint)
    if not path.exists():
        raise FileNotFoundError(f"--checkpoint {path} does not exist")
    run_config = None
    if (path / "config.yaml").is_file():  # a run directory: its latest checkpoint
        run_config = path / "config.yaml"
        latest = RunDirectory(path).latest_checkpoint()
        if latest is None:
            raise FileNotFoundError(f"run directory {path} has no complete checkpoint")
        path = latest
    if (path / "policy").is_dir():
        model_dir = path / "policy"
        candidate = path.parent.parent / "config.yaml"
        run_config = run_config or (candidate if candidate.is_file() else None)
    else:
        model_dir = path
    config = load_config(args.config or run_config, [*args.overrides])
    metrics = evaluate_model(config, model_dir)
    print(json.dumps(metrics, indent=1))
    print(f"success: {metrics['eval/success']:.3f}")
    return 0


def _audit(args) -> int:
    from agentcredit.train.audit import run_audit
    from agentcredit.train.config import load_config

    if args.copies < 1:
        raise ConfigError(f"--copies {args.copies}: need at least 1 rollout per task")
    checkpoint = Path(args.checkpoint) if args.checkpoint else None
    if checkpoint is not None and not checkpoint.exists():
        raise FileNotFoundError(f"--checkpoint {checkpoint} does not exist")
    config = load_config(args.config, [f"env.name={args.env}", *args.overrides])
    run_audit(config, args.split, args.copies, checkpoint)
    return 0


def _fmt(value: float | None) -> str:
    return "not evaluated" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
