"""What every benchmark writes besides its figures: the machine, the command, the commit."""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import torch

from agentcredit.config import ConfigError, load_config
from agentcredit.run.directory import RunDirectory
from agentcredit.run.model_folder import weights_problem
from agentcredit.train.build import check_device
from agentcredit.train.evaluation.evaluate import evaluate_model
from agentcredit.train.loop import train

RESULTS = Path(__file__).resolve().parent / "results"
REPO = RESULTS.parents[1]


def machine() -> dict:
    """CPU model, core count, device and torch version of this run."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "device": "cpu", "torch": torch.__version__}


# THE EXIT-CODE RULE, as the agentcredit CLI's: a usage or bad-input error is one ``error:``
# line on stderr and exit status 2, before any work; an internal error 1 (Python's
# traceback, or one ``BenchmarkFailed`` message); interrupted 130. Every argument is checked
# at parsing (the types below) or right after it, before the first file or process is made
# (tests/benchmarks/test_usage_errors.py walks every script with a bad argument)


class BenchmarkParser(argparse.ArgumentParser):
    """A benchmark script's argument parser: a bad argument is one ``error:`` line, status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


class BenchmarkFailed(Exception):
    """The measured work failed (a child process, a run read back without what it needs): not
    the user's argument, so ``run_script`` prints it and exits with status 1."""


def run_script(main: Callable[[], object]) -> NoReturn:
    """Run a benchmark script's ``main`` under the exit-code rule: a ``ConfigError`` (a bad
    override or setting) or a ``SystemExit`` with a message (the scripts' argument checks)
    becomes one ``error:`` line and status 2; a ``BenchmarkFailed`` is its ``error:`` message
    and status 1; Ctrl-C is status 130; anything else is a bug and keeps its traceback
    (status 1)."""
    try:
        main()
    except ConfigError as err:
        print(f"error: {str(err).strip().splitlines()[0]}", file=sys.stderr)
        sys.exit(2)
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(f"error: {stop.code.strip().splitlines()[0]}", file=sys.stderr)
            sys.exit(2)
        raise
    except BenchmarkFailed as err:
        print(f"error: {err}", file=sys.stderr)  # whole: a child's output tail helps
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(0)


def at_least(low: int) -> Callable[[str], int]:
    """An ``argparse`` type: a whole number of at least ``low``."""
    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value}: it must be at least {low}")
        return value
    return whole


def number_from(low: float, *, above: bool = False) -> Callable[[str], float]:
    """An ``argparse`` type: a finite number of at least ``low`` (``above``: more than it)."""
    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value < low or (above and value == low):
            raise argparse.ArgumentTypeError(
                f"{text}: it must be a finite number {'above' if above else 'of at least'} "
                f"{low:g}")
        return value
    return number


def seed_list(text: str) -> list[int]:
    """An ``argparse`` type: ``--seeds 0,1,2``, distinct whole numbers of at least 0 (each
    also a ``run.seed`` the config loader checks)."""
    try:
        seeds = [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole "
                                         "numbers such as 0,1,2") from None
    if min(seeds) < 0 or len(set(seeds)) < len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r}: each seed must be at least 0, and given "
                                         "once")
    return seeds


def git_revision(text: str) -> str:
    """An ``argparse`` type: a revision of this repository that names a commit."""
    done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{text}^{{commit}}"],
                          cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode:
        raise argparse.ArgumentTypeError(f"{text!r} is not a commit of {REPO} (git log "
                                         "--oneline lists them)")
    return text


def model_folder(text: str) -> str:
    """An ``argparse`` type: ``--model``, a model folder (a run's ``reference/``) whose settings
    and weights pass the checks loading it makes (``run.model_folder``)."""
    folder = Path(text).expanduser()
    if not (folder / "config.json").is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a model folder (no config.json); "
                                         "pass a run's reference/ or another folder written "
                                         "by save_pretrained")
    problem = weights_problem(folder)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return text


def folder_to_fill(text: str) -> str:
    """An ``argparse`` type: a folder the script writes into, made when missing; never an
    existing file."""
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} exists and is not a folder")
    return text


def result_name(name: str) -> str:
    """``--name``: a plain file name for ``benchmarks/results/`` (no folder, no ``..``);
    an ``argparse`` type, so a bad one stops the script before any work."""
    if (not name or name in (".", "..") or "/" in name or "\\" in name
            or not name.isprintable() or Path(name).name != name):
        raise argparse.ArgumentTypeError(
            f"{name!r} must be a plain file name (no folder): results go to {RESULTS}")
    return name


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_start_args(description: str) -> argparse.Namespace:
    """``--model DIR`` (an SFT start), ``--threads N`` (set for torch) and ``key=value`` config
    overrides: the command line of the trainer measurements that replay one start. The
    overrides are loaded as the scripts load them (``model.name=DIR sft.enabled=false``), and
    the device checked, so a bad one stops the script before any work."""
    parser = BenchmarkParser(description=description)
    parser.add_argument("--model", required=True, type=model_folder,
                        help="an SFT start (a run's reference/)")
    parser.add_argument("--threads", type=at_least(1), default=1)
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    check_device(load_config(None, [f"model.name={args.model}", "sft.enabled=false",
                                    *args.overrides]))
    torch.set_num_threads(args.threads)
    return args


def write_result(name: str, config: dict, metrics: dict, targets: dict, notes: str,
                 quick: bool, **extra) -> Path:
    """Write ``benchmarks/results/NAME.json`` (``NAME.quick.json`` for a smoke run); ``NAME``
    is a plain file name (``result_name``)."""
    try:
        result_name(name)
    except argparse.ArgumentTypeError as err:
        raise ValueError(f"result name {err}") from None
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / (f"{name}.quick.json" if quick else f"{name}.json")
    payload = {
        "benchmark": name,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_commit": git_commit(),
        "machine": machine(),
        "config": config,
        "metrics": metrics,
        "targets": targets,
        "notes": notes,
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


#: the ``NAME+READING`` suffixes of ``method_overrides``: reading -> its settings
READINGS = {"median": ("credit.options.centre=median",)}


def method_overrides(method: str) -> list[str]:
    """``NAME[/BACKBONE[/GATE]]`` -> ``method=NAME`` plus the estimator options.

    ``vict/gigpo`` = VICT on GiGPO's step-level advantage, ``adrs/gigpo/L3`` =
    ADRS+TVA on GiGPO, ``grpo`` = plain GRPO. The VICT paper's baselines (issue 18):
    ``salt`` (``salt/rloo`` on RLOO), ``hcapo``, ``proxmo``, ``dapo``, and its
    compatibility rows ``vict/salt``, ``vict/hcapo``, ``vict/gigpo``. A ``+READING`` after
    the name sets one of ``READINGS``: ``vict+median/grpo`` = VICT on GRPO with the paper's
    literal median centring.
    """
    name, *rest = method.split("/")
    name, _, reading = name.partition("+")
    if reading and reading not in READINGS:
        raise SystemExit(f"method {method!r}: unknown reading +{reading}; use one of "
                         f"{', '.join('+' + r for r in READINGS)}")
    extra = [f"method={name}", *READINGS.get(reading, ())]
    for key, value in zip(("backbone", "gate"), rest, strict=False):
        extra.append(f"credit.options.{key}={value}")
    return extra


def sft_start(overrides: Sequence[str], name: str) -> Path:
    """Train the embedded default's SFT warm start (no RL update); its checkpoint directory.

    ``overrides`` must include ``run.output_dir``; the run is ``<output_dir>/<name>``,
    and its ``reference`` checkpoint, once written, is reused rather than retrained.
    """
    config = load_config(None, [*overrides, f"run.name={name}", "run.updates=0",
                                "run.eval_at_start=false"])
    reference = config.run_dir / "reference"
    if not all((reference / f).is_file() for f in ("model.safetensors", "tokenizer.json",
                                                     "tokenizer_config.json")):
        train(config, echo=lambda _: None)
    return reference


def method_config(start: Path, method: str, overrides: Sequence[str], name: str):
    """The ``TrainConfig`` of ``method``'s RL run ``name`` from the checkpoint ``start``."""
    return load_config(None, [*overrides, f"model.name={start}", "sft.enabled=false",
                              f"run.name={name}", *method_overrides(method)])


def check_runs(methods: Sequence[str], seeds: Sequence[int], overrides: Sequence[str]) -> None:
    """Load the config of each seed's ``sft_start`` and of each method's run from it
    (``method_config``) and check its device, so a bad method, seed or setting stops a
    benchmark before its first start is trained (``ConfigError`` or ``SystemExit``: one
    ``error:`` line under ``run_script``)."""
    for seed in seeds:
        runs = [*overrides, f"run.seed={seed}"]
        check_device(load_config(None, [*runs, f"run.name=sft_seed{seed}", "run.updates=0"]),
                     training=True)
        for method in methods:
            method_config(Path("reference"), method, runs, f"{method.replace('/', '-')}_seed{seed}")


def start_evaluation(start: Path, config, cache: dict) -> dict:
    """The ``eval`` record of ``start`` under ``config`` (update 0), computed once per
    evaluation setting.

    Every run of one seed evaluates the same start with the same sampling
    (``train.evaluation.evaluate.evaluation_generator(seed, 0)``), so the methods that share
    the evaluation settings (``eval.*``, the prompt, decoding and step limit, the
    environment) share one evaluation; ``cache`` holds them across calls.
    """
    r = config.rollout
    key = json.dumps([config.run.seed, str(start), dataclasses.asdict(config.eval),
                      dataclasses.asdict(config.env), r.max_steps, r.max_new_tokens,
                      r.history_window, r.history_style, r.decoding, r.action_format,
                      r.max_prompt_tokens], sort_keys=True, default=str)
    if key not in cache:
        cache[key] = {"kind": "eval", "update": 0, **evaluate_model(config, start, update=0)}
    return cache[key]


def run_method(start: Path, method: str, overrides: Sequence[str], name: str) -> list[dict]:
    """RL updates of ``method`` from the checkpoint ``start``; the run's ``metrics.jsonl`` records.

    A run of that name already in the output directory is not started again: a
    finished one (its last checkpoint is the last update) is read back, an
    unfinished one resumes from its latest checkpoint, and one that stopped before
    its first checkpoint is deleted and run afresh.
    """
    config = method_config(start, method, overrides, name)
    checkpoint = RunDirectory(config.run_dir).latest_checkpoint()
    if checkpoint is None and config.run_dir.exists():
        print(f"{config.run_dir}: stopped before its first checkpoint; starting it again",
              file=sys.stderr, flush=True)
        shutil.rmtree(config.run_dir)
    if checkpoint is None or int(checkpoint.name.removeprefix("update_")) < config.run.updates:
        train(config, resume=checkpoint is not None, echo=lambda _: None)
    lines = (config.run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def phase_shares_pct(phases: dict[str, float]) -> dict[str, float]:
    """Each phase's share of the summed phase times, in percent."""
    total = sum(phases.values())
    return {phase: 100.0 * seconds / total for phase, seconds in phases.items()}


# THE ENVIRONMENT FUZZ (run safety): shared by the alfworld, webshop and searchqa benchmarks

FUZZ_SEED = 0
FUZZ_NOTE = ("Fuzz: hostile actions (random, edited, 10k-100k-character, non-UTF-8, control "
             "characters) mixed with valid ones, checked after every step; config.fuzz has "
             "its own date and commit.")
FUZZ_TARGETS = {"fuzz_exceptions": {"max": 0}, "fuzz_inconsistencies": {"max": 0}}


def fuzz_figures(env, tasks: list, actions: int,
                 tasks_label: str) -> tuple[dict[str, float], dict]:
    """``actions`` hostile actions (``tests/envs/fuzz_actions.py``) over ``tasks`` in ``env``: the
    figures, and the config (``tasks_label`` names the tasks) with its own date and commit."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "envs"))
    fuzz_actions = importlib.import_module("fuzz_actions")
    report = fuzz_actions.fuzz(env, tasks, actions, FUZZ_SEED)
    print(report.summary())
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return report.metrics(), {"seed": FUZZ_SEED, "tasks": tasks_label, "date": date,
                              "git_commit": git_commit(), **report.record()}


def fuzz_results(name: str) -> Path:
    """``RESULTS / name``, the results file ``--only-fuzz`` merges into, checked before the
    fuzz runs: it exists and holds a benchmark's ``config``, ``metrics``, ``targets`` and
    ``notes``; else ``SystemExit`` with the fix (one ``error:`` line under ``run_script``)."""
    path = RESULTS / name
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: run the whole benchmark (without "
                         "--only-fuzz) first")
    try:
        payload = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SystemExit(f"{path} is not a readable results file ({err}); run the whole "
                         "benchmark (without --only-fuzz) again") from None
    shape = {"config": dict, "metrics": dict, "targets": dict, "notes": str}
    if not isinstance(payload, dict) or not all(isinstance(payload.get(key), kind)
                                                for key, kind in shape.items()):
        raise SystemExit(f"{path} lacks a benchmark's config, metrics, targets and notes; run "
                         "the whole benchmark (without --only-fuzz) again")
    return path


def merge_fuzz(name: str, metrics: dict, config: dict) -> Path:
    """Put the fuzz figures into the existing results file ``name`` (``fuzz_results``),
    keeping its other figures."""
    path = fuzz_results(name)
    payload = json.loads(path.read_text())
    payload["metrics"].update(metrics)
    payload["config"]["fuzz"] = config
    payload["targets"].update(FUZZ_TARGETS)
    if FUZZ_NOTE not in payload["notes"]:
        payload["notes"] += " " + FUZZ_NOTE
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
