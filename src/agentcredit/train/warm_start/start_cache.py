"""The cache of embedded warm starts, addressed by everything that determines them.

The embedded default's start (the tiny model bootstrapped on the demonstrations' text, then
SFT on them) is a pure function of the train games, the demonstrations' settings, the model
and tokenizer settings, the prompt, the SFT settings, the seed and the code. ``start_inputs``
gathers exactly those; their SHA-256 names a folder of ``sft.cache_dir``
(``<key>/reference/`` the model and tokenizer, ``sft.json`` the SFT metrics line,
``inputs.json`` what was hashed, for a look). A run whose inputs hash alike reads the start
back instead of training it; any change among them (a setting, a game, an edit to the
package's code, another torch) gives another key, so a stale start is never reused.
Only the embedded model is cached: a named checkpoint's files are not hashed.

It is only a cache: a run never stops for it. An entry whose model does not load as a
checkpoint's would not (weights cut short, NaN, a symlinked ``model.safetensors``, a
garbage tokenizer) is named in one stderr line and set aside (renamed to
``.unusable-<key>-<pid>``), and the start is trained again and stored afresh; a cache folder
that cannot be written (read-only, full, a file) is skipped with one line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import agentcredit
from agentcredit.config import TrainConfig
from agentcredit.disk_full import writing
from agentcredit.envs.base import Task
from agentcredit.envs.bounded_json import loads
from agentcredit.run.safe_files import new_folder, read_regular, remove_name
from agentcredit.train.build import collector_config

#: bumped when the folder's layout changes
FORMAT = 1
#: the files a complete entry holds
REFERENCE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
#: the largest ``sft.json`` or ``inputs.json`` read
RECORD_LIMIT = 1 << 20
#: the environment settings that pick RL and evaluation tasks only, or say where games lie
_NOT_START = ("pool_games_per_type", "valid_games_per_type", "cache_dir")


def _package_digest() -> str:
    """SHA-256 over the package's Python and YAML files (path and bytes, in path order)."""
    root = Path(agentcredit.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".yaml")
                       and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _without(record: dict, names: Sequence[str]) -> dict:
    """``record`` with ``names`` dropped at every depth."""
    return {k: _without(v, names) if isinstance(v, dict) else v
            for k, v in record.items() if k not in names}


def start_inputs(config: TrainConfig, train_tasks: Sequence[Task],
                 skill_texts: Sequence[str]) -> dict:
    """Everything the embedded start depends on, as plain JSON data.

    Args:
        config: the run's config; its ``model``, ``sft`` (less ``cache`` and ``cache_dir``),
            the environment's name, train-game count and options, the prompt, the decoding and
            the layout SFT runs (``optim.layout``),
            ``run.seed``, ``run.threads`` and ``run.device`` enter.
        train_tasks: the train games the demonstrations are played on (their ids, types and
            instructions enter).
        skill_texts: the skill texts the tokenizer and the skill-prefixed copies read.
    """
    env = config.env
    options = dataclasses.asdict(env.options) if env.options is not None else {}
    tasks = hashlib.sha256(json.dumps([[t.task_id, t.split, t.task_type, t.instruction]
                                       for t in train_tasks]).encode()).hexdigest()
    return {
        "format": FORMAT,
        "code": _package_digest(),
        "packages": {name: metadata.version(name) for name in ("torch", "transformers",
                                                               "tokenizers")},
        "model": dataclasses.asdict(config.model),
        "sft": _without(dataclasses.asdict(config.sft), ("cache", "cache_dir")),
        "env": {"name": env.name, "train_games_per_type": env.train_games_per_type,
                "options": _without(options, _NOT_START), "train_tasks": tasks},
        "prompt": dataclasses.asdict(collector_config(config).prompt),
        "decoding": config.rollout.decoding,
        "layout": config.optim.layout,
        "skill_texts": hashlib.sha256("\0".join(skill_texts).encode()).hexdigest(),
        "run": {"seed": config.run.seed, "threads": config.run.threads,
                "device": config.run.device},
    }


def start_key(inputs: dict) -> str:
    """The SHA-256 hex digest of ``inputs`` (``start_inputs``), keys sorted."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class CachedStart:
    """One entry of the cache: ``folder`` holds ``reference/``, ``sft.json``, ``inputs.json``."""

    folder: Path

    @property
    def reference(self) -> Path:
        return self.folder / "reference"

    def sft_record(self) -> dict:
        """The SFT metrics line logged when the start was trained (bounded JSON).

        Raises:
            OSError, ValueError: the file is missing, a link, too large or not bounded JSON.
        """
        return loads(read_regular(self.folder / "sft.json", RECORD_LIMIT))


class StartCache:
    """The entries under ``root``, one folder per key."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def find(self, inputs: dict) -> CachedStart | None:
        """The complete entry of ``inputs``, or None (also for one whose ``inputs.json``
        differs: a damaged or foreign folder is never read as this start)."""
        entry = CachedStart(self.root / start_key(inputs))
        try:
            complete = (all((entry.reference / f).is_file() for f in REFERENCE_FILES)
                        and loads(read_regular(entry.folder / "inputs.json", RECORD_LIMIT))
                        == inputs)
            entry.sft_record()
        except (OSError, ValueError):
            return None
        return entry if complete else None

    def store(self, inputs: dict, reference: Path, sft_record: dict) -> CachedStart:
        """Copy ``reference`` and the SFT line in as the entry of ``inputs``, atomically: a
        kill leaves either nothing or the whole entry; of two runs storing the same key at
        once the first rename wins (the contents are the same), and an incomplete folder of
        that key is replaced."""
        entry = CachedStart(self.root / start_key(inputs))
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = new_folder(self.root / f".tmp-{entry.folder.name}-{os.getpid()}")
        try:
            with writing(tmp):
                shutil.copytree(reference, tmp / "reference")
                (tmp / "sft.json").write_text(json.dumps(sft_record) + "\n")
                (tmp / "inputs.json").write_text(json.dumps(inputs, indent=1, sort_keys=True)
                                                 + "\n")
            if self.find(inputs) is None:
                remove_name(entry.folder)  # an incomplete or foreign folder of that key
            tmp.rename(entry.folder)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if self.find(inputs) is None:  # not another run storing the same start first
                raise
        return entry

    def set_aside(self, entry: CachedStart, why: str) -> None:
        """Say in one stderr line that ``entry`` is unusable (``why``) and rename it out of the
        way (``.unusable-<key>-<pid>``, never read again), so the start is stored afresh."""
        aside = self.root / f".unusable-{entry.folder.name}-{os.getpid()}"
        try:
            entry.folder.rename(aside)
            where = f"set aside as {aside}"
        except OSError as err:
            where = f"left in place ({err.strerror or err})"
        print(f"warning: the cached start {entry.folder} is unusable ({why}); {where}, and the "
              "start is trained again", file=sys.stderr, flush=True)
