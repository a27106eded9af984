"""A checkpoint's trainer state read back: ``read_trainer_state`` and the checks that
come before anything in its files is used.

A checkpoint's trainer state holds no pickled object: ``trainer_state.pt`` has only
tensors (the optimiser state, torch's RNG states), read with
``torch.load(weights_only=True)``, and ``trainer_state.json`` the rest (the
update, the starting success, the python and numpy RNG states, the log line
counts); the RNG states are ``RandomStreams``' (``run/random_streams.py``). A
checkpoint of the earlier format (one ``trainer_state.pt`` with everything) is read
by the same weights-only loader with numpy's array type allowed, and said in one
line; anything else in a state file is refused, never run.

Before torch reads ``trainer_state.pt``, its zip archive is bounded from its central
directory and its ``data.pkl`` (``_archive_problem``: entries, compression, declared
sizes), so a crafted file allocates nothing it declares. The state read is checked
against ``STATE_SCHEMA`` (``trainer_state.json``'s plain data, then the tensors), and
``optimizer_problem`` says whether the optimizer fits the policy beside it.
``RunDirectory`` (``run/directory.py``) writes the state and uses what this reads.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agentcredit.envs.bounded_json import JsonRefused, loads
from agentcredit.error_text import first_line, short
from agentcredit.run.model_folder import parameter_shapes
from agentcredit.run.random_streams import JSON_STREAMS, TENSOR_STREAMS, takes_states
from agentcredit.run.safe_files import open_regular, read_regular, refusal

CHECKPOINT_STATE = "trainer_state.pt"
CHECKPOINT_RECORD = "trainer_state.json"
STATE_FORMAT = 2
"""``format`` of ``trainer_state.json``; a checkpoint without that file has the earlier one."""
#: the logs whose line counts a checkpoint records (``log_lines``)
LOGS = ("metrics.jsonl", "ledger.jsonl")
# the earlier format pickled numpy's RNG state: its array type, under numpy 1's and 2's names
_RECONSTRUCT = np.zeros(0).__reduce__()[0]
_EARLIER_FORMAT_GLOBALS = [np.ndarray, np.dtype, np.dtypes.UInt32DType,
                           *((_RECONSTRUCT, f"numpy.{core}.multiarray._reconstruct")
                             for core in ("core", "_core"))]
"""Kept while runs checkpointed 2026-11-29 to 2026-12-02 (before c99c51c) may be resumed:
remove it, its branch in ``read_trainer_state`` and its test after 2027-01-02."""


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
        raise StateUnreadable(f"cannot read {CHECKPOINT_RECORD} ({first_line(err)})") from None
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
        return StateUnreadable(f"{CHECKPOINT_RECORD}: {key} = {short(record.get(key))} is not "
                               f"{STATE_SCHEMA[key]}")

    update = record.get("update")
    named = checkpoint.name.removeprefix("update_")
    if (not is_int(update) or update < 1 or not named.isdigit() or update != int(named)):
        raise refuse("update")
    success = record.get("success_start")
    if success is not None and not (_is_number(success) and 0 <= success <= 1):
        raise refuse("success_start")
    lines = record.get("log_lines")
    if (not isinstance(lines, dict) or set(lines) != set(LOGS)
            or not all(is_int(n) and n >= 0 for n in lines.values())):
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
        return f"cannot read {path.name} as the zip archive torch writes ({first_line(err)})"


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
                and is_int(pid[1])):
            raise pickle.UnpicklingError(f"a persistent id other than a storage's: {short(pid)}")
        return _Storage(str(pid[2]), pid[1], pid[4])

    def _declare(self, storage: Any, dtype: Any, size: Any) -> _StandIn:
        import torch

        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise pickle.UnpicklingError(f"a tensor of dtype {short(dtype)}")
        if storage is not None and not isinstance(storage, _Storage):
            raise pickle.UnpicklingError(f"a tensor on {short(storage)}, not a storage")
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
        return f"cannot read {name} ({type(err).__name__}: {first_line(err)})"
    for storage, itemsize, size in reader.tensors:
        stored = 0
        if storage is not None:
            entry = present.get(f"{prefix}data/{storage.key}", 0)
            if not is_int(storage.count) or not 0 <= storage.count * storage.itemsize <= entry:
                return (f"{name} declares storage data/{storage.key} of {short(storage.count)} "
                        f"elements of {storage.itemsize} bytes, its entry holds {entry:,} bytes")
            stored = storage.count * storage.itemsize
        if not (isinstance(size, tuple | list) and all(is_int(n) and n >= 0 for n in size)):
            return f"{name} declares a tensor of size {short(size)}"
        declared = math.prod(size) * itemsize
        if declared > stored:
            return (f"{name} declares a tensor of shape {list(size)} ({declared:,} bytes) over "
                    f"a storage of {stored:,} bytes; a damaged or crafted file, not loaded")
    return ""


def optimizer_problem(state: dict[str, Any], policy: Path) -> str:
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
        raise StateUnreadable(f"cannot read {path.name} ({first_line(err)})") from None
    except (OSError, RuntimeError, EOFError, ValueError, RecursionError) as err:
        raise StateUnreadable(f"cannot read {path.name} ({first_line(err)})") from None


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer of a JSON record (a bool is not one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and np.isfinite(value))
