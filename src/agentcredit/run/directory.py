"""A run's folder on disk: creating and resuming it, its logs and checkpoints.

::

    run_dir/
      config.yaml       the validated config
      metrics.jsonl     one line per SFT run, update and evaluation ("kind")
      ledger.jsonl      VICT credit rows (estimators that write a ledger)
      init_model/       the bootstrapped tiny model (embedded default only)
      reference/        the RL starting policy (after SFT), also the frozen KL reference
      checkpoints/update_NNNNN/{policy/, trainer_state.pt, trainer_state.json}
      rollouts/         saved updates for the report's viewer (run.save_rollouts)
      tensorboard/      TensorBoard events (run.tensorboard)

A checkpoint's trainer state holds no pickled object: ``trainer_state.pt`` has only
tensors (the optimiser state, torch's RNG states), read with
``torch.load(weights_only=True)``, and ``trainer_state.json`` the rest (the
update, the starting success, the python and numpy RNG states, the log line
counts); the RNG states are ``RandomStreams``' (``run/random_streams.py``). A
checkpoint of the earlier format (one ``trainer_state.pt`` with everything) is read
by the same weights-only loader with numpy's array type allowed, and said in one
line; anything else in a state file is refused, never run.

What a kill can leave, and what ``RunDirectory.resume`` does with it:

- a torn last line in ``metrics.jsonl`` or ``ledger.jsonl``: cut;
- a half-written checkpoint: it is written under a temporary name and renamed
  when complete, so it is never seen; a complete one that is not whole is skipped
  for the one before: weights that are not the model (``run/model_folder.py``: cut
  short, no tensors, a missing parameter, a wrong shape, NaN), a state that does
  not load or breaks ``STATE_SCHEMA`` (an update other than the folder's number, a
  negative line count, an RNG state its generator refuses, a file over 1 MiB or
  nested too deep, a tensor declaring more bytes than its storage holds), an optimizer
  that does not fit the policy's parameters, or an update that is not the last one the
  metrics lines it counts logged;
- a checkpoint newer than the logs (the logs lost lines the checkpoint counted):
  each checkpoint records how many lines each log had when it was written, so
  such a checkpoint is skipped for the one before;
- logs longer than the checkpoint: rolled back to the recorded line counts, and
  the resumed run rewrites those lines exactly. A count is proven before it cuts:
  every line it would cut must be a row of an update after the checkpoint's and
  every line it keeps one of an update up to it (each row's ``update`` field), else
  the checkpoint is skipped for the one before; no row is deleted that the counts
  cannot attribute.

Each fallback is said in one line. A run that died after its SFT warm start and
before its first checkpoint restarts RL from ``reference/``. Every log line is read
within bounds (``jsonl_log.numbered_records``): a damaged line stops resume naming it,
before anything is cut. A log or ``config.yaml`` that is a symlink (even to another
file of the run), a FIFO or other special file, or a file with another hard link is
never repaired, cut or rewritten: the run stops and says so; a run folder
(``checkpoints/``, ``rollouts/``, ``reference/``, ``init_model/``) that is a link too.
Every name a run creates (a temporary file or folder) is created exclusively and
``.lock`` and the checkpoint's files are opened without following links
(``run/safe_files.py``), so a planted link is refused by name and nothing outside the
run folder changes. A folder whose logs are empty (a start that failed before its
first line) can be started again.

A process holds ``run_dir/.lock`` (an ``flock``) for the life of its run, so a
second run on the same folder stops at once, naming the holder. The kernel drops
the lock when its process dies, so a killed run's folder can be resumed at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import math
import os
import pickle
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from agentcredit.disk_full import writing
from agentcredit.envs.bounded_json import JsonRefused, loads
from agentcredit.jsonl_log import (
    DamagedLog,
    count_lines,
    numbered_records,
    repair_torn_tail,
    truncate_lines,
)
from agentcredit.run.live_metrics import TENSORBOARD_FOLDER
from agentcredit.run.model_folder import parameter_shapes, weights_problem
from agentcredit.run.random_streams import (
    JSON_STREAMS,
    TENSOR_STREAMS,
    RandomStreams,
    takes_states,
)
from agentcredit.run.safe_files import (
    clear_name,
    new_folder,
    open_regular,
    own_folder,
    read_regular,
    refusal,
    remove_name,
    write_new,
)
from agentcredit.run.saved_rollouts import FOLDER

CHECKPOINT_STATE = "trainer_state.pt"
CHECKPOINT_RECORD = "trainer_state.json"
STATE_FORMAT = 2
"""``format`` of ``trainer_state.json``; a checkpoint without that file has the earlier one."""
LOGS = ("metrics.jsonl", "ledger.jsonl")
CONFIG_DIGEST = "# written by agentcredit; sha256 of the lines below: "
"""The first line of a run's ``config.yaml``: a hand edit of the rest is found on resume."""
#: the folders a run writes and deletes inside (never through a link)
FOLDERS = ("init_model", "reference", "checkpoints", FOLDER, TENSORBOARD_FOLDER)
# the earlier format pickled numpy's RNG state: its array type, under numpy 1's and 2's names
_RECONSTRUCT = np.zeros(0).__reduce__()[0]
_EARLIER_FORMAT_GLOBALS = [np.ndarray, np.dtype, np.dtypes.UInt32DType,
                           *((_RECONSTRUCT, f"numpy.{core}.multiarray._reconstruct")
                             for core in ("core", "_core"))]


class RunDirectoryError(RuntimeError):
    """The run directory cannot be used as asked (exists already, or holds nothing to resume)."""


@dataclass
class ResumePoint:
    """Where a resumed run starts.

    Attributes:
        policy_dir: the model folder to load (a checkpoint's ``policy/`` or ``reference/``).
        update: the last finished update (0 when restarting from ``reference/``).
        trainer_state: the checkpoint's optimiser, RNG and bookkeeping state; ``None``
            when restarting from ``reference/``.
    """

    policy_dir: Path
    update: int
    trainer_state: dict[str, Any] | None


class RunDirectory:
    """The folder of one run; see the module docstring for its layout."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock: int | None = None

    def lock(self) -> None:
        """Hold the folder's lock until ``unlock`` or the end of the process.

        Raises:
            RunDirectoryError: another live process holds it (its pid is named).
        """
        self.path.mkdir(parents=True, exist_ok=True)
        fd = open_regular(self.path / ".lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise RunDirectoryError(
                f"run directory {self.path} is in use by process {holder}; "
                "wait for it to finish or choose another run.name=...") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock = fd

    def unlock(self) -> None:
        """Release the lock (the file stays; only the kernel lock matters)."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def overwrite(self) -> None:
        """Delete what a previous run left (the caller holds the lock)."""
        for name in ("config.yaml", *LOGS, ".tmp_reference", *FOLDERS):
            remove_name(self.path / name)  # a link is unlinked, never followed

    def write_config(self, data: dict[str, Any]) -> None:
        """Write ``config.yaml`` (``data`` as YAML, after a ``CONFIG_DIGEST`` line) atomically
        through a temporary name created exclusively, never through a link."""
        text = yaml.safe_dump(data, sort_keys=False)
        path = self.path / "config.yaml"
        with writing(path):
            write_new(path, f"{CONFIG_DIGEST}{_sha256(text.encode())}\n{text}".encode(),
                      self.path / ".config.yaml.tmp")

    def edited_config(self) -> str:
        """Why ``config.yaml`` is not what the run wrote (its lines differ from the digest on
        its first line: edited by hand), or ``""``; a file without the digest line (written
        by an earlier version) is taken as it is."""
        path = self.path / "config.yaml"
        first, _, rest = read_regular(path, RECORD_LIMIT).partition(b"\n")
        if not first.startswith(CONFIG_DIGEST.encode()):
            return ""
        if first.removeprefix(CONFIG_DIGEST.encode()).decode(errors="replace") == _sha256(rest):
            return ""
        return (f"{path} is not the config this run wrote (it was edited by hand), so it no "
                "longer says what trained the run; put the file back, give the changes resume "
                "allows as key=value after --resume, or start a new run with --config "
                f"{path}")

    @property
    def metrics(self) -> Path:
        """``metrics.jsonl``."""
        return self.path / "metrics.jsonl"

    @property
    def ledger(self) -> Path:
        """``ledger.jsonl``."""
        return self.path / "ledger.jsonl"

    @property
    def reference(self) -> Path:
        """``reference/``, the RL starting policy."""
        return self.path / "reference"

    @property
    def checkpoints(self) -> Path:
        """``checkpoints/``."""
        return self.path / "checkpoints"

    @property
    def rollouts(self) -> Path:
        """``rollouts/``, the saved updates (``run/saved_rollouts.py``)."""
        return self.path / FOLDER

    def has_resume_point(self) -> bool:
        """Whether ``resume`` has something to start from: a checkpoint or ``reference/``
        (a run stopped during its SFT warm start has neither)."""
        return (_is_model_dir(self.reference)
                or any(_is_model_dir(p / "policy") for p in self.checkpoints.glob("update_*")))

    def interrupted_hint(self, update: int) -> str:
        """What to tell a user who stopped the run after ``update`` with Ctrl-C."""
        if self.has_resume_point():
            return (f"interrupted at update {update}; resume with: agentcredit train --resume "
                    f"{self.path}")
        return ("interrupted before the run saved anything to resume from (nothing to resume "
                "from: no SFT start in reference/, no checkpoint); run the same command again "
                "with --overwrite")

    def _holds_a_run(self) -> bool:
        """Whether a run wrote anything that counts: a log line, a checkpoint, ``reference/``."""
        return (any(_size(self.path / log) for log in LOGS) or self.checkpoints.exists()
                or self.reference.exists())

    def _check_run_files(self) -> None:
        """Refuse a log or ``config.yaml`` that is a symlink (even to another file of the run),
        a special file or a file with another hard link (a run cuts and rewrites them), and a
        run folder that is a symlink (a run writes and deletes inside it)."""
        for name in (*LOGS, "config.yaml"):
            why = refusal(self.path / name, written=True)
            if why:
                raise RunDirectoryError(f"{why} (a run cuts and rewrites its {name})")
        for name in FOLDERS:
            path = self.path / name
            if path.is_symlink():
                raise RunDirectoryError(
                    f"{path} is a symlink (to {os.readlink(path)}); a run writes and deletes "
                    f"inside its {name}/, so it never follows a link there: remove the link")

    def create(self) -> None:
        """Make the folder for a new run; refuse one that already holds a run."""
        self._check_run_files()
        if self._holds_a_run():
            raise RunDirectoryError(
                f"run directory {self.path} already holds a run; resume it with "
                f"`agentcredit train --resume {self.path}`, start it again with --overwrite, or "
                "choose another run.name=...")
        self.path.mkdir(parents=True, exist_ok=True)

    # RESUME

    def resume(self, echo: Callable[[str], None]) -> ResumePoint:
        """Repair the logs, pick the newest usable checkpoint, roll the logs back to it."""
        self._check_run_files()
        if (self.path / "config.yaml").exists() and (why := self.edited_config()):
            raise RunDirectoryError(why)
        if not self._holds_a_run():
            raise RunDirectoryError(f"nothing to resume in {self.path}: it holds no run "
                                    "(start one without --resume)")
        for log in LOGS:
            if repair_torn_tail(self.path / log):
                echo(f"{log}: cut a torn last line")
        try:  # every line read, within bounds, before anything is cut
            rows = {log: _rows(self.path / log) for log in LOGS}
        except DamagedLog as err:
            raise _unresumable(err) from None
        lines = {log: count_lines(self.path / log) for log in LOGS}
        for checkpoint in sorted(self.checkpoints.glob("update_*"), reverse=True):
            state, problem = _read_checkpoint(checkpoint, echo)
            if state is not None:
                short = [log for log in LOGS if lines[log] < state["log_lines"][log]]
                if short:
                    problem = (f"{' and '.join(short)} ended before it (the logs lost lines "
                               "it counts)")
                else:
                    problem = (_metrics_disagree(rows["metrics.jsonl"], state)
                               or _cut_problem(rows, state["log_lines"], state["update"]))
            if problem:
                echo(f"checkpoint {checkpoint.name} is unusable: {problem}; trying the one "
                     "before")
                continue
            for log in LOGS:
                truncate_lines(self.path / log, state["log_lines"][log])
            return ResumePoint(checkpoint / "policy", state["update"], state)
        if _is_model_dir(self.reference):
            # every line but the leading SFT ones is RL's, which restarts from its start
            keep = {"metrics.jsonl": _leading_kind(rows["metrics.jsonl"], "sft"),
                    "ledger.jsonl": 0}
            for log in LOGS:
                truncate_lines(self.path / log, keep[log])
            echo(f"no usable checkpoint in {self.path}: restarting RL from reference/ "
                 "(the SFT warm start is kept)")
            return ResumePoint(self.reference, 0, None)
        raise RunDirectoryError(
            f"nothing to resume in {self.path}: it has no usable checkpoint and no finished "
            "SFT start (reference/); start it again with --overwrite")

    # CHECKPOINTS

    def save_reference(self, model, tokenizer) -> None:
        """Write ``reference/`` atomically (a kill leaves either nothing or all of it)."""
        tmp = new_folder(self.path / ".tmp_reference")
        with writing(tmp):
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        clear_name(self.reference)
        tmp.rename(self.reference)

    def save_checkpoint(self, update: int, model, tokenizer, optimizer, streams: RandomStreams,
                        success_start: float | None, keep: int) -> Path:
        """Write ``checkpoints/update_NNNNN`` atomically and keep the newest ``keep``."""
        import torch

        final = own_folder(self.checkpoints) / f"update_{update:05d}"
        tmp = new_folder(self.checkpoints / f".tmp_update_{update:05d}")
        with writing(tmp / "policy"):
            model.save_pretrained(tmp / "policy")
            tokenizer.save_pretrained(tmp / "policy")
        streams_state = streams.state()
        tensors = {"optimizer": optimizer.state_dict(),
                   "random": {k: streams_state.pop(k) for k in TENSOR_STREAMS}}
        record = {"format": STATE_FORMAT, "update": update, "success_start": success_start,
                  "random": streams_state,
                  "log_lines": {log: count_lines(self.path / log) for log in LOGS}}
        with writing(tmp / CHECKPOINT_STATE), open(tmp / CHECKPOINT_STATE, "wb") as handle:
            torch.save(tensors, handle)  # a file object: a full disk raises the system's error
        with writing(tmp / CHECKPOINT_RECORD):
            (tmp / CHECKPOINT_RECORD).write_text(json.dumps(record))
        with writing(tmp):
            _fsync_tree(tmp)
        clear_name(final)
        tmp.rename(final)
        for old in sorted(self.checkpoints.glob("update_*"))[:-keep]:
            remove_name(old)
        return final

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint folder, or None."""
        done = sorted(p for p in self.checkpoints.glob("update_*")
                      if (p / CHECKPOINT_STATE).is_file())
        return done[-1] if done else None


class StateUnreadable(Exception):
    """A checkpoint's trainer state that does not load; the message says why, as a clause."""


def read_trainer_state(checkpoint: Path, tensors: bool = True,
                       echo: Callable[[str], None] = print) -> dict[str, Any]:
    """A checkpoint's trainer state: ``update``, ``success_start``, ``log_lines`` and, with
    ``tensors``, ``optimizer`` and ``random`` (what ``RandomStreams.restore`` takes). Nothing
    in the files can run code (module notes); the earlier format is said through ``echo``.
    The state is checked against ``STATE_SCHEMA`` before it is returned.

    Raises:
        StateUnreadable: a file is missing, damaged, a link or special file, of another
            version, holds anything but tensors and plain data, or breaks the schema.
    """
    record_path, state_path = checkpoint / CHECKPOINT_RECORD, checkpoint / CHECKPOINT_STATE
    for path in (record_path, state_path):
        if refusal(path):
            raise StateUnreadable(refusal(path))
    if not record_path.exists():
        echo(f"checkpoint {checkpoint.name} has the earlier trainer-state format; reading it "
             "with torch's weights-only loader")
        state = _load_tensors(state_path, _EARLIER_FORMAT_GLOBALS, mmap=not tensors)
        if not isinstance(state, dict) or not {"update", "log_lines"} <= state.keys():
            raise StateUnreadable(f"{CHECKPOINT_STATE} was written by another version")
        _check_record(state, checkpoint)
        if tensors:
            _check_tensors(state)
        return state
    try:
        record = loads(read_regular(record_path, RECORD_LIMIT))
    except (OSError, JsonRefused) as err:
        raise StateUnreadable(f"cannot read {CHECKPOINT_RECORD} ({_first_line(err)})") from None
    if not isinstance(record, dict) or record.get("format") != STATE_FORMAT:
        raise StateUnreadable(f"{CHECKPOINT_RECORD} was written by another version")
    _check_record(record, checkpoint)
    if not tensors:
        return record
    saved = _load_tensors(state_path, [], mmap=False)
    try:
        state = {**record, "optimizer": saved["optimizer"],
                 "random": {**record["random"], **saved["random"]}}
    except (KeyError, TypeError):
        raise StateUnreadable(f"{CHECKPOINT_STATE} was written by another version") from None
    _check_tensors(state)
    return state


RECORD_LIMIT = 1 << 20
"""Largest ``trainer_state.json`` read (one is about 30 kB: the RNG states)."""
ARCHIVE_ENTRIES = 100_000
"""Most entries a ``trainer_state.pt`` may hold (torch writes one per tensor storage: about
three per parameter tensor for AdamW, a few thousand for a 7B model)."""
STATE_SLACK = 64 << 20
"""Bytes a ``trainer_state.pt`` may hold beyond four times its policy's weights (AdamW's
two moments are at most four times weights of 16-bit floats; the RNG states, the steps)."""
STATE_SCHEMA = {
    "update": "an integer >= 1, the number in the checkpoint folder's name",
    "success_start": "null or a number from 0 to 1",
    "log_lines": "the line count of each of metrics.jsonl and ledger.jsonl, integers >= 0",
    "random": "the python, numpy and torch generator states, each one its generator accepts",
    "optimizer": "an AdamW state: one parameter group, finite tensors",
}
"""What each field of a checkpoint's trainer state must be (docs/loaded_files.md)."""


def _check_record(record: dict[str, Any], checkpoint: Path) -> None:
    """Refuse a plain-data state outside ``STATE_SCHEMA`` (the tensors are checked apart)."""
    def refuse(key: str) -> StateUnreadable:
        return StateUnreadable(f"{CHECKPOINT_RECORD}: {key} = {_short(record.get(key))} is not "
                               f"{STATE_SCHEMA[key]}")

    update = record.get("update")
    named = checkpoint.name.removeprefix("update_")
    if (not _is_int(update) or update < 1 or not named.isdigit() or update != int(named)):
        raise refuse("update")
    success = record.get("success_start")
    if success is not None and not (_is_number(success) and 0 <= success <= 1):
        raise refuse("success_start")
    lines = record.get("log_lines")
    if (not isinstance(lines, dict) or set(lines) != set(LOGS)
            or not all(_is_int(n) and n >= 0 for n in lines.values())):
        raise refuse("log_lines")
    if not takes_states(record.get("random"), JSON_STREAMS):
        raise refuse("random")


def _check_tensors(state: dict[str, Any]) -> None:
    """Refuse RNG tensors torch would not take and an optimizer state that is not AdamW's."""
    import torch

    def refuse(key: str) -> StateUnreadable:
        return StateUnreadable(f"{CHECKPOINT_STATE}: {key} is not {STATE_SCHEMA[key]}")

    if not takes_states(state.get("random"), TENSOR_STREAMS):
        raise refuse("random")
    optimizer = state.get("optimizer")
    groups = optimizer.get("param_groups") if isinstance(optimizer, dict) else None
    moments = optimizer.get("state") if isinstance(optimizer, dict) else None
    if (not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict)
            or not isinstance(groups[0].get("params"), list) or not isinstance(moments, dict)):
        raise refuse("optimizer")
    for values in moments.values():
        tensors = values.values() if isinstance(values, dict) else [None]
        if not all(isinstance(t, torch.Tensor) and torch.isfinite(t).all() for t in tensors):
            raise refuse("optimizer")


def _state_limit(checkpoint: Path) -> int:
    """The most bytes ``checkpoint``'s ``trainer_state.pt`` may expand to: four times its
    policy's weights plus ``STATE_SLACK``."""
    weights = sum(p.lstat().st_size for p in (checkpoint / "policy").glob("*.safetensors"))
    return 4 * weights + STATE_SLACK


def _archive_problem(path: Path, limit: int) -> str:
    """Why the zip archive ``path`` may not be loaded, read from its central directory and
    its ``data.pkl`` (nothing is decompressed, built or allocated), or ``""``: not a zip
    archive, more than ``ARCHIVE_ENTRIES`` entries, a compressed entry (torch stores every
    entry as it is, so a compressed one can only be a bomb), entries declaring more than the
    file holds or than ``limit`` bytes, or a tensor or storage in its ``data.pkl`` declaring
    more bytes than are stored for it (``_declared_size_problem``)."""
    try:
        with os.fdopen(open_regular(path), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            archive = zipfile.ZipFile(handle)
            entries = archive.infolist()
            if len(entries) > ARCHIVE_ENTRIES:
                return (f"{path.name} holds {len(entries):,} entries, more than the "
                        f"{ARCHIVE_ENTRIES:,} a trainer state has")
            packed = next((e.filename for e in entries
                           if e.compress_type != zipfile.ZIP_STORED), None)
            if packed is not None:
                return (f"{path.name} holds a compressed entry ({packed}); torch writes none, "
                        "and one can expand without bound, so it is not read")
            total = sum(e.file_size for e in entries)
            if total > min(size, limit):
                return (f"{path.name} declares {total:,} bytes of entries, more than the "
                        f"{min(size, limit):,} it may hold (its file's size, and four times "
                        "the policy's weights)")
            return _declared_size_problem(path.name, archive)
    except (OSError, zipfile.BadZipFile, ValueError, EOFError) as err:
        return f"cannot read {path.name} as the zip archive torch writes ({_first_line(err)})"


#: torch's rebuild functions of a tensor over a stored storage: (storage, offset, size, ...);
#: ``_rebuild_tensor_v3`` gives the tensor's own dtype, as its seventh argument
_STORED_TENSORS = ("_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3",
                   "_rebuild_qtensor")
#: torch's rebuild functions of a tensor with no stored bytes, by where its dtype is among
#: their arguments (its size follows it)
_UNSTORED_TENSORS = {"_rebuild_meta_tensor_no_storage": 0, "_rebuild_wrapper_subclass": 1}


@dataclass(frozen=True)
class _Storage:
    """A storage as an archive's ``data.pkl`` names it: its entry ``data/<key>``, the size
    of one element and the elements it declares."""

    key: str
    itemsize: int
    count: Any


class _StandIn:
    """Any global of the pickle other than a tensor's: takes every argument and state, holds
    nothing, runs nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, value: Any) -> None:
        pass

    def extend(self, values: Any) -> None:
        pass


class _DeclaredTensors(pickle.Unpickler):
    """Reads a torch archive's ``data.pkl`` without building a tensor or importing anything:
    each tensor becomes ``(storage or None, itemsize, size)`` in ``tensors`` (its sizes as
    declared), a storage type its element size, a storage a ``_Storage``, any other global a
    ``_StandIn``."""

    def __init__(self, data: bytes):
        super().__init__(io.BytesIO(data))
        self.tensors: list[tuple[_Storage | None, Any, Any]] = []

    def find_class(self, module: str, name: str) -> Any:
        import torch

        if module == "torch._utils" and name in _STORED_TENSORS:
            return lambda storage, offset, size, *rest: self._declare(
                storage, rest[3] if name == "_rebuild_tensor_v3" else None, size)
        if module == "torch._utils" and name in _UNSTORED_TENSORS:
            at = _UNSTORED_TENSORS[name]
            return lambda *args: self._declare(None, args[at], args[at + 1])
        if (module, name) == ("torch._tensor", "_rebuild_from_type_v2"):
            return lambda rebuild, kind, args, state: rebuild(*args)
        if module == "torch" and isinstance(vars(torch).get(name), torch.dtype):
            return vars(torch)[name]  # vars: no lazy import of a submodule by that name
        if (module, name) == ("torch.storage", "UntypedStorage"):
            return 1
        if module == "torch" and name.endswith("Storage"):
            return torch.serialization.StorageType(name).dtype.itemsize  # KeyError: unknown
        return _StandIn

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and _is_int(pid[1])):
            raise pickle.UnpicklingError(f"a persistent id other than a storage's: {_short(pid)}")
        return _Storage(str(pid[2]), pid[1], pid[4])

    def _declare(self, storage: Any, dtype: Any, size: Any) -> _StandIn:
        import torch

        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise pickle.UnpicklingError(f"a tensor of dtype {_short(dtype)}")
        if storage is not None and not isinstance(storage, _Storage):
            raise pickle.UnpicklingError(f"a tensor on {_short(storage)}, not a storage")
        itemsize = dtype.itemsize if dtype is not None else storage.itemsize
        self.tensors.append((storage, itemsize, size))
        return _StandIn()


def _declared_size_problem(name: str, archive: zipfile.ZipFile) -> str:
    """Why the torch archive ``archive`` (the file ``name``) declares a tensor or storage
    larger than the bytes behind it, read from its ``data.pkl`` alone (``_DeclaredTensors``:
    nothing built), or ``""``. A tensor needs its elements times their size in stored bytes
    (a stride-0 view declared 2^20 x 2^20 over 4 bytes would be allocated in full by the
    first operation on it), a storage the bytes of its entry ``data/<key>``."""
    pickles = [e for e in archive.namelist() if e.count("/") == 1 and e.endswith("/data.pkl")]
    if len(pickles) != 1:
        return f"cannot read {name} as the zip archive torch writes (it has no one data.pkl)"
    prefix = pickles[0].removesuffix("data.pkl")
    present = {e.filename: e.file_size for e in archive.infolist()}
    reader = _DeclaredTensors(archive.read(pickles[0]))
    try:
        reader.load()
    except Exception as err:  # noqa: BLE001  (whatever stops this reader, the file is damaged)
        return f"cannot read {name} ({type(err).__name__}: {_first_line(err)})"
    for storage, itemsize, size in reader.tensors:
        stored = 0
        if storage is not None:
            entry = present.get(f"{prefix}data/{storage.key}", 0)
            if not _is_int(storage.count) or not 0 <= storage.count * storage.itemsize <= entry:
                return (f"{name} declares storage data/{storage.key} of {_short(storage.count)} "
                        f"elements of {storage.itemsize} bytes, its entry holds {entry:,} bytes")
            stored = storage.count * storage.itemsize
        if not (isinstance(size, tuple | list) and all(_is_int(n) and n >= 0 for n in size)):
            return f"{name} declares a tensor of size {_short(size)}"
        declared = math.prod(size) * itemsize
        if declared > stored:
            return (f"{name} declares a tensor of shape {list(size)} ({declared:,} bytes) over "
                    f"a storage of {stored:,} bytes; a damaged or crafted file, not loaded")
    return ""


def _optimizer_problem(state: dict[str, Any], policy: Path) -> str:
    """Why the optimizer state does not fit the policy's parameters (their number, and the
    shape of each moment), or ``""``."""
    shapes = list(parameter_shapes(policy).values())
    params = state["optimizer"]["param_groups"][0]["params"]
    if len(params) != len(shapes):
        return (f"its {CHECKPOINT_STATE} holds an optimizer for {len(params)} parameters, the "
                f"policy has {len(shapes)}")
    for index, (param, shape) in enumerate(zip(params, shapes, strict=True)):
        moments = state["optimizer"]["state"].get(param, {})
        for name, value in moments.items():
            if value.dim() and tuple(value.shape) != shape:
                return (f"its {CHECKPOINT_STATE} gives parameter {index} an {name} of shape "
                        f"{list(value.shape)}, the policy's is {list(shape)}")
    return ""


def _load_tensors(path: Path, allowed: list, mmap: bool) -> Any:
    """``torch.load(path, weights_only=True)`` with ``allowed`` globals (``mmap``: tensors
    mapped, not read, for a caller that reads only the plain data); every failure is a
    ``StateUnreadable``, a refused global said as such. The archive is bounded first
    (``_archive_problem``), before torch allocates anything it declares."""
    import torch

    problem = _archive_problem(path, _state_limit(path.parent))
    if problem:
        raise StateUnreadable(problem)
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as err:
        if "Weights only load failed" in str(err):
            raise StateUnreadable(f"{path.name} holds objects other than tensors and plain data, "
                                  "refused unread (loading them could run code)") from None
        raise StateUnreadable(f"cannot read {path.name} ({_first_line(err)})") from None
    except (OSError, RuntimeError, EOFError, ValueError, RecursionError) as err:
        raise StateUnreadable(f"cannot read {path.name} ({_first_line(err)})") from None


def _read_checkpoint(checkpoint: Path, echo: Callable[[str], None]) -> tuple[dict | None, str]:
    """``(state, "")`` for a checkpoint whose weights and state load and fit each other, else
    ``(None, why not)``."""
    if not _is_model_dir(checkpoint / "policy"):
        return None, "its policy/ has no weights"
    problem = weights_problem(checkpoint / "policy")
    if problem:
        return None, problem.replace("its ", "its policy/", 1)
    try:
        state = read_trainer_state(checkpoint, echo=echo)
    except StateUnreadable as err:
        return None, str(err)
    problem = _optimizer_problem(state, checkpoint / "policy")
    return (None, problem) if problem else (state, "")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and np.isfinite(value))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _unresumable(err: DamagedLog) -> RunDirectoryError:
    return RunDirectoryError(f"{err}: delete or repair that line, or start the run again with "
                             "--overwrite")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` of each line of the log ``path`` (none if it is missing)."""
    return list(numbered_records(path)) if path.exists() else []


def _leading_kind(rows: list[tuple[int, dict[str, Any]]], kind: str) -> int:
    """How many lines at the start of a log (its ``rows``) are records of ``kind``."""
    count = 0
    for number, record in rows:
        if record.get("kind") != kind or number != count + 1:
            break
        count += 1
    return count


def _cut_problem(rows: dict[str, list[tuple[int, dict[str, Any]]]], keep: dict[str, int],
                 update: int) -> str:
    """Why keeping the first ``keep[log]`` lines of each log is not proven to keep the rows of
    updates up to ``update`` and cut only later ones (each row's ``update`` field), or
    ``""``."""
    for log in LOGS:
        for number, record in rows[log]:
            row_update = record.get("update")
            cut = number > keep[log]
            if not _is_int(row_update) or (row_update > update) != cut:
                side = "cut" if cut else "keep"
                return (f"cutting {log} to {keep[log]} lines would {side} line {number}, a row "
                        f"of update {_short(row_update)}, though the checkpoint is after update "
                        f"{update} (its line count disagrees with the file)")
    return ""


def _metrics_disagree(rows: list[tuple[int, dict[str, Any]]], state: dict[str, Any]) -> str:
    """Why ``state`` does not fit ``metrics.jsonl`` (the last ``kind: update`` line it counts
    must be its own update), or ``""``."""
    last = None
    for number, record in rows:
        if number > state["log_lines"]["metrics.jsonl"]:
            break
        if record.get("kind") == "update":
            last = record.get("update")
    if last != state["update"]:
        return (f"its {CHECKPOINT_RECORD} says update {state['update']}, but the metrics "
                f"lines it counts end at update {last}")
    return ""


def _fsync_tree(root: Path) -> None:
    """Flush every file under ``root`` to disk before the checkpoint is renamed into place."""
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
