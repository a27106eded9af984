"""The cache of embedded warm starts, addressed by everything that determines them.

The embedded default's start (the tiny model bootstrapped on the demonstrations' text, then
SFT on them) is a pure function of the train games, the demonstrations' settings, the model
and tokenizer settings, the prompt, the SFT settings, the seed and the code. ``start_inputs``
gathers exactly those; their SHA-256 names a folder of ``sft.cache_dir``
(``<key>/reference/`` the model and tokenizer, ``sft.json`` the SFT metrics line,
``inputs.json`` what was hashed, for a look, ``contents.json`` the key the entry was stored
under and the SHA-256 of each of its other files). A run whose inputs hash alike reads the
start back instead of training it; any change among them (a setting, a game, an edit to the
package's code or to a plug-in's, another torch) gives another key, so a stale start is never
reused. A plug-in's code is the source of the package of every module outside agentcredit that
registers the run's environment (its suite and hooks) or estimator, or is an installed
``agentcredit.environments`` / ``agentcredit.estimators`` entry point, with its distribution's
name and version where known; a miss because only that changed is named in one stderr line.
Only the embedded model is cached: a named checkpoint's files are not hashed.

It is only a cache: a run never stops for it. An entry whose files are not those stored
under its key (``contents.json`` names another key, a file edited, added, removed or
swapped with another entry's, a link) or whose model does not load as a checkpoint's would
not (weights cut short, NaN, a symlinked ``model.safetensors``, a garbage tokenizer) is
named in one stderr line and set aside (renamed to
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
from importlib.util import find_spec
from pathlib import Path

import agentcredit
from agentcredit.config import TrainConfig
from agentcredit.credit import get_estimator
from agentcredit.disk_full import writing
from agentcredit.envs.base import Task
from agentcredit.envs.bounded_json import loads
from agentcredit.envs.suites import environment_spec
from agentcredit.plugins import ENVIRONMENTS, ESTIMATORS, entry_points
from agentcredit.run.safe_files import new_folder, open_regular, read_regular, remove_name
from agentcredit.train.build import collector_config

#: bumped when the folder's layout changes
FORMAT = 2
#: the record in an entry of the key it was stored under and the SHA-256 of each other file
CONTENTS = "contents.json"
#: the files a complete entry holds
REFERENCE_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
#: the largest ``sft.json`` or ``inputs.json`` read
RECORD_LIMIT = 1 << 20
#: the environment settings that pick RL and evaluation tasks only, or say where games lie
_NOT_START = ("pool_games_per_type", "valid_games_per_type", "cache_dir")
#: the files of a plug-in's package that enter the key: its code and the text beside it
PLUGIN_SUFFIXES = (".py", ".yaml", ".yml", ".json", ".toml", ".txt")
#: the most changes of one plug-in a miss names (the rest are counted)
SAID_FILES = 4


def _package_digest() -> str:
    """SHA-256 over the package's Python and YAML files (path and bytes, in path order)."""
    root = Path(agentcredit.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".yaml")
                       and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _plugin_modules(config: TrainConfig) -> dict[str, str | None]:
    """Per plug-in source (``_source``) outside agentcredit, its distribution (``"name
    version"``, None where unknown): those of the modules of the run's environment (its suite
    class and hooks), of the run's estimator, and of every installed entry point."""
    spec = environment_spec(config.env.name)
    hooks = (spec.solver, spec.solver_refusal, spec.planner)
    modules = [spec.suite.__module__, get_estimator(config.credit.estimator).fn.__module__,
               *(hook.partition(":")[0] if isinstance(hook, str) else hook.__module__
                 for hook in hooks if hook is not None)]
    known: dict[str, str] = {}
    for group in (ENVIRONMENTS, ESTIMATORS):
        for point in entry_points(group):
            modules.append(point.module)
            if point.dist is not None:
                known[point.module.split(".")[0]] = f"{point.dist.name} {point.dist.version}"
    names = {_source(module) for module in modules if module.split(".")[0] != "agentcredit"}
    return {name: known.get(name.split(".")[0]) for name in sorted(names)}


def _source(module: str) -> str:
    """The source that holds ``module``: its outermost regular package (one with an
    ``__init__.py``), or the module itself where only namespace packages hold it."""
    parts = module.split(".")
    for depth in range(1, len(parts)):
        if _found(".".join(parts[:depth]))[0]:
            return ".".join(parts[:depth])
    return module


def _found(name: str) -> tuple[str | None, list[str]]:
    """``(file, folders)`` of module ``name``: its file (a package's ``__init__.py``; None for
    a namespace package or a module with no file) and a package's folders. A module not
    imported yet is found as importing it would find it (one that is not there has no file:
    its hook fails where it is used, not here)."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__file__", None), list(getattr(module, "__path__", None) or ())
    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None, []
    return (spec.origin if spec.has_location else None,
            list(spec.submodule_search_locations or ()))


def _source_files(name: str) -> dict[str, str]:
    """SHA-256 per file of the source ``name`` (``_source``): each ``PLUGIN_SUFFIXES`` file of
    a package (``name/…``), or a module's one file (by its file name)."""
    origin, folders = _found(name)
    if origin is None:
        files = {}
    elif folders:
        prefix = name.replace(".", "/")
        files = {f"{prefix}/{path.relative_to(folder).as_posix()}": path
                 for folder in map(Path, folders) for path in folder.rglob("*")
                 if path.suffix in PLUGIN_SUFFIXES and "__pycache__" not in path.parts
                 and path.is_file()}
    else:
        files = {Path(origin).name: Path(origin)}
    return {file: hashlib.sha256(files[file].read_bytes()).hexdigest() for file in sorted(files)}


def plugin_inputs(config: TrainConfig) -> dict[str, dict]:
    """The plug-in code the run's start may depend on: per source (``_plugin_modules``), its
    ``distribution`` and its ``files`` (name → SHA-256)."""
    return {name: {"distribution": distribution, "files": _source_files(name)}
            for name, distribution in _plugin_modules(config).items()}


def plugin_changes(before: dict, now: dict) -> str:
    """What differs between two ``plugin_inputs``, in words (``""``: nothing):
    ``"hall: hall.py edited"``, ``"lamps: lamps-env 0.1 → 0.2, lamps/engine.py edited"``."""
    said = []
    for source in sorted(before.keys() | now.keys()):
        if source not in before or source not in now:
            said.append(f"{source} {'added' if source not in before else 'removed'}")
            continue
        old, new = before[source], now[source]
        parts = ([f"{old['distribution']} → {new['distribution']}"]
                 if old["distribution"] != new["distribution"] else [])
        for name in sorted(old["files"].keys() | new["files"].keys()):
            if name not in old["files"]:
                parts.append(f"{name} added")
            elif name not in new["files"]:
                parts.append(f"{name} removed")
            elif old["files"][name] != new["files"][name]:
                parts.append(f"{name} edited")
        if len(parts) > SAID_FILES:
            parts[SAID_FILES:] = [f"{len(parts) - SAID_FILES} more"]
        if parts:
            said.append(f"{source}: {', '.join(parts)}")
    return "; ".join(said)


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
            ``run.seed``, ``run.threads`` and ``run.device`` enter; and the code of the
            plug-ins of its environment and estimator (``plugin_inputs``).
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
        "plugins": plugin_inputs(config),
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


def _file_digests(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` but ``CONTENTS``, by its path there.

    Raises:
        UnsafeRunFile: one is a symlink or a special file (never followed).
    """
    digests = {}
    for path in sorted(folder.rglob("*")):
        name = path.relative_to(folder).as_posix()
        if name == CONTENTS or (path.is_dir() and not path.is_symlink()):
            continue
        with os.fdopen(open_regular(path), "rb") as handle:
            digests[name] = hashlib.file_digest(handle, "sha256").hexdigest()
    return digests


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

    def damage(self) -> str:
        """Why the entry's files are not those stored under its key (its ``CONTENTS`` missing
        or naming another key, a file whose SHA-256 differs from the one recorded there, or
        one added, removed or a link), or ``""``."""
        try:
            record = loads(read_regular(self.folder / CONTENTS, RECORD_LIMIT))
            files = _file_digests(self.folder)
        except (OSError, ValueError) as err:
            return f"its files cannot be checked against its {CONTENTS} ({err})"
        if not isinstance(record, dict) or record.get("key") != self.folder.name:
            return f"its {CONTENTS} was not written for the key {self.folder.name}"
        stored = record.get("files") if isinstance(record.get("files"), dict) else {}
        changed = sorted(name for name in stored.keys() | files.keys()
                         if stored.get(name) != files.get(name))
        if len(changed) > SAID_FILES:
            changed[SAID_FILES:] = [f"{len(changed) - SAID_FILES} more"]
        if changed:
            return (f"its files are not those stored under its key: {', '.join(changed)} "
                    f"differ from the SHA-256 in its {CONTENTS}")
        return ""


class StartCache:
    """The entries under ``root``, one folder per key."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def find(self, inputs: dict) -> CachedStart | None:
        """The complete entry of ``inputs``, or None (also for one whose ``inputs.json``
        differs: a damaged or foreign folder is never read as this start). A miss where an
        entry differs from ``inputs`` in plug-in code only says so in one stderr line, naming
        the entry and what changed (``plugin_changes``). An entry whose files are not those
        stored under its key (``CachedStart.damage``) is set aside, and a miss."""
        entry = self._complete(inputs)
        if entry is not None and (why := entry.damage()):
            self.set_aside(entry, why)
            entry = None
        if entry is None and (older := self._plugin_edit(inputs)) is not None:
            folder, changes = older
            print(f"warm start: the cached start {folder} was trained on other plug-in code "
                  f"({changes}); the start is trained again", file=sys.stderr, flush=True)
        return entry

    def _plugin_edit(self, inputs: dict) -> tuple[Path, str] | None:
        """The newest entry whose inputs differ from ``inputs`` in ``plugins`` only, and the
        change in words; None when there is none."""
        same = {k: v for k, v in inputs.items() if k != "plugins"}
        found = []
        try:
            folders = [p for p in self.root.iterdir() if not p.name.startswith(".")]
        except OSError:
            return None
        for folder in folders:
            try:
                stored = loads(read_regular(folder / "inputs.json", RECORD_LIMIT))
                when = folder.stat().st_mtime_ns
            except (OSError, ValueError):
                continue
            if not (isinstance(stored, dict)
                    and {k: v for k, v in stored.items() if k != "plugins"} == same):
                continue
            try:
                changes = plugin_changes(stored.get("plugins"), inputs["plugins"])
            except (AttributeError, KeyError, TypeError):  # a foreign folder: no word on it
                continue
            if changes:
                found.append((when, str(folder), changes))
        if not found:
            return None
        _, folder, changes = max(found)
        return Path(folder), changes

    def _complete(self, inputs: dict) -> CachedStart | None:
        """``find`` without a word on a miss."""
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
                (tmp / CONTENTS).write_text(json.dumps({"key": entry.folder.name,
                                                        "files": _file_digests(tmp)}) + "\n")
            if not self._usable(inputs):
                remove_name(entry.folder)  # an incomplete, damaged or foreign folder of that key
            tmp.rename(entry.folder)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not self._usable(inputs):  # not another run storing the same start first
                raise
        return entry

    def _usable(self, inputs: dict) -> bool:
        """Whether the entry of ``inputs`` is complete and holds what was stored under it."""
        entry = self._complete(inputs)
        return entry is not None and not entry.damage()

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
