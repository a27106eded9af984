"""Run directories as the report reads them: found, read tolerantly, every problem named.

``find_runs`` turns the paths a user gives into runs: a path holding
``config.yaml`` or ``metrics.jsonl`` is one run; any other folder is a folder of
runs (a benchmark's output directory: ``METHOD_seedN`` folders side by side).
``read_run`` reads one run's ``config.yaml``, ``metrics.jsonl`` and
``ledger.jsonl`` and lists its saved updates (``rollouts/``, read later by the
viewer). Nothing is recomputed: the page shows what the run logged.

A run is grouped under its *method*: its folder name without the ``_seedN``
suffix (``vict-gigpo_seed1`` → ``vict-gigpo``, seed 1), else the folder name,
with the seed from its config.

Reading never stops at a bad file. A missing file, a line that is not JSON, or
bytes that are not UTF-8 become one sentence in ``RunData.problems`` naming the
file (bad bytes are read as U+FFFD, so they show as text); a run still training
is read as far as it has gone, its torn last line skipped as a resumed run
would cut it.

Everything read is bounded, so a hostile run folder cannot exhaust the machine:
files are opened as regular files only (``run/safe_files.py``: a symlink or a FIFO
is refused by name), ``config.yaml`` is read as the run config is
(``config/bounded_yaml.py``: ``YAML_LIMIT`` bytes, ``YAML_NODES`` values once its aliases are
expanded, so an entity-expansion file is refused, not expanded), a log ``LOG_LIMIT`` bytes,
and a log line is parsed by ``bounded_json`` (nesting and number length bounded: a line too
deep or holding a 50,000-digit number is skipped and named like any line that is not JSON).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentcredit.config import bounded_yaml
from agentcredit.config.bounded_yaml import YAML_LIMIT
from agentcredit.envs.bounded_json import JsonRefused, loads
from agentcredit.run.safe_files import read_regular
from agentcredit.run.saved_rollouts import FOLDER, saved_updates

RUN_FILES = ("config.yaml", "metrics.jsonl")
_SEED_SUFFIX = re.compile(r"^(?P<method>.+)_seed(?P<seed>\d+)$")
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
LOG_LIMIT = 1 << 30
"""Most bytes of a ``metrics.jsonl`` or ``ledger.jsonl`` read."""


@dataclass
class RunData:
    """What one run directory holds, as far as it could be read.

    Attributes:
        path: the run directory.
        name: its folder name (text-safe).
        method: the group it is plotted in (see the module docstring).
        seed: the seed, or ``None`` when neither the name nor the config says.
        config: ``config.yaml`` as plain data (``{}`` when missing or damaged).
        updates: the ``kind: update`` lines of ``metrics.jsonl``, in order.
        evals: the ``kind: eval`` lines.
        ledger: the ``ledger.jsonl`` rows.
        saved: ``(update, file)`` of the saved updates in ``rollouts/``.
        problems: one sentence per missing or damaged file of the run.
    """

    path: Path
    name: str
    method: str
    seed: int | None
    config: dict[str, Any] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)
    evals: list[dict[str, Any]] = field(default_factory=list)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    saved: list[tuple[int, Path]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def planned_updates(self) -> int | None:
        """``run.updates`` of the config, or ``None`` without one."""
        value = self.config.get("run", {}).get("updates")
        return value if isinstance(value, int) else None

    @property
    def updates_done(self) -> int:
        """The last logged update (0 before the first)."""
        return max((r.get("update", 0) for r in self.updates), default=0)

    @property
    def estimator(self) -> str:
        """``credit.estimator`` of the config, or ``""``."""
        return str(self.config.get("credit", {}).get("estimator", ""))

    @property
    def status(self) -> str:
        """``finished``, ``in progress (k of n updates)``, ``no RL updates`` or ``unknown``."""
        planned = self.planned_updates
        if planned == 0 or (not self.updates and not self.evals and planned is not None):
            return "no RL updates"
        if planned is None:
            return "unknown length"
        if self.updates_done >= planned:
            return "finished"
        return f"in progress ({self.updates_done} of {planned} updates)"


def find_runs(paths: Sequence[str | Path]) -> tuple[list[RunData], list[str]]:
    """The runs under ``paths`` (see the module docstring) and the paths that held none."""
    runs, problems = [], []
    for given in paths:
        path = Path(given)
        if not path.exists():
            problems.append(f"{clean_text(str(path))} does not exist")
        elif _is_run(path):
            runs.append(read_run(path))
        elif path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.is_dir() and _is_run(p))
            if not inside:
                problems.append(f"{clean_text(str(path))} holds no run directory (a folder "
                                f"with {' or '.join(RUN_FILES)})")
            runs += [read_run(p) for p in inside]
        else:
            problems.append(f"{clean_text(str(path))} is a file, not a run directory (a folder "
                            f"with {' or '.join(RUN_FILES)})")
    return runs, problems


def read_run(path: Path) -> RunData:
    """Everything the report shows of the run in ``path``; see the module docstring."""
    name = clean_text(path.resolve().name)
    config, problems = _read_config(path / "config.yaml")
    match = _SEED_SUFFIX.match(name)
    seed = config.get("run", {}).get("seed") if isinstance(config.get("run"), dict) else None
    run = RunData(path=path, name=name, method=match["method"] if match else name,
                  seed=int(match["seed"]) if match else seed if isinstance(seed, int) else None,
                  config=config, problems=problems)
    metrics_path = path / "metrics.jsonl"
    if metrics_path.is_file():
        records, bad = read_records(metrics_path)
        run.problems += bad
        run.updates = [r for r in records if r.get("kind") == "update"
                       and isinstance(r.get("update"), int)]
        run.evals = [r for r in records if r.get("kind") == "eval"
                     and isinstance(r.get("update"), int)]
    else:
        run.problems.append(f"{_shown(metrics_path)} is missing: no curves or tables for this run")
    ledger_path = path / "ledger.jsonl"
    if ledger_path.is_file():
        run.ledger, bad = read_records(ledger_path)
        run.problems += bad
    run.saved = saved_updates(path / FOLDER)
    return run


def read_records(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The JSON objects of a JSONL file and what was wrong with it.

    A torn last line (no final newline: a run still writing) is skipped without a
    word; a line that is not a JSON object is skipped and named; bytes that are
    not UTF-8 are read as U+FFFD and named.
    """
    try:
        data = read_regular(path, LOG_LIMIT)
    except OSError as err:
        return [], [f"{_shown(path)} cannot be read ({err.strerror or err}); it is skipped"]
    lines = data.split(b"\n")[:-1]
    records, broken, undecodable = [], [], []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            undecodable.append(number)
        try:
            record = loads(text)
        except JsonRefused:
            broken.append(number)
            continue
        if not isinstance(record, dict):
            broken.append(number)
            continue
        records.append(clean_json(record) if has_escaped_surrogate(text) else record)
    problems = []
    if broken:
        problems.append(f"{_shown(path)}: {_lines(broken)} skipped (not a JSON record)")
    if undecodable:
        problems.append(f"{_shown(path)}: bytes that are not UTF-8 on {_lines(undecodable)} "
                        "(shown as \ufffd)")
    return records, problems


def has_escaped_surrogate(json_text: str) -> bool:
    """Whether JSON text escapes a surrogate (``\\udcff``), so its strings may need
    ``clean_json``; a quick look before a walk through every string."""
    return _ESCAPED_SURROGATE.search(json_text) is not None


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (an undecodable byte of a file name, a ``\\udcff``
    escape in JSON) replaced by U+FFFD, so it can be written as UTF-8 and shown as text."""
    return _SURROGATE.sub("\ufffd", text)  # a str never holds a valid pair: each is lone


def clean_json(value: Any) -> Any:
    """``value`` with ``clean_text`` applied to every string in it (keys too)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json(v) for v in value]
    return value


def _read_config(path: Path) -> tuple[dict[str, Any], list[str]]:
    if not (path.is_file() or path.is_symlink()):
        return {}, [f"{_shown(path)} is missing: the run's settings and length are unknown"]
    try:
        data = clean_json(bounded_yaml.loads(read_regular(path, YAML_LIMIT).decode(
            "utf-8", errors="replace")))
    except OSError as err:
        return {}, [f"{_shown(path)} cannot be read ({err}); its settings are unknown"]
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else "parse error"
        return {}, [f"{_shown(path)} is not valid YAML ({first}); its settings are unknown"]
    except ValueError as err:
        return {}, [f"{_shown(path)} {err}; its settings are unknown"]
    if not isinstance(data, dict):
        return {}, [f"{_shown(path)} holds no mapping of settings; its settings are unknown"]
    return data, []


def _is_run(path: Path) -> bool:
    return path.is_dir() and any((path / name).is_file() for name in RUN_FILES)


def _shown(path: Path) -> str:
    """A run's file as a problem names it (the page puts the run's name first)."""
    return clean_text(path.name)


def _lines(numbers: Iterable[int]) -> str:
    """``line 3`` or ``lines 3, 5, … and 4 more``."""
    numbers = list(numbers)
    listed = ", ".join(map(str, numbers[:5])) + (f" and {len(numbers) - 5} more"
                                                  if len(numbers) > 5 else "")
    return f"line{'s' if len(numbers) > 1 else ''} {listed}"
