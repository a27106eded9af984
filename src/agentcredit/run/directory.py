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
tensors, ``trainer_state.json`` the rest; it is read back, and checked before anything in
it is used, by ``run/trainer_state.py`` (``read_trainer_state``).

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
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agentcredit.disk_full import writing
from agentcredit.error_text import short
from agentcredit.jsonl_log import (
    DamagedLog,
    count_lines,
    numbered_records,
    repair_torn_tail,
    truncate_lines,
)
from agentcredit.run.live_metrics import TENSORBOARD_FOLDER
from agentcredit.run.model_folder import weights_problem
from agentcredit.run.random_streams import TENSOR_STREAMS, RandomStreams
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
from agentcredit.run.trainer_state import (
    CHECKPOINT_RECORD,
    CHECKPOINT_STATE,
    LOGS,
    RECORD_LIMIT,
    STATE_FORMAT,
    StateUnreadable,
    is_int,
    optimizer_problem,
    read_trainer_state,
)

CONFIG_DIGEST = "# written by agentcredit; sha256 of the lines below: "
"""The first line of a run's ``config.yaml``: a hand edit of the rest is found on resume."""
#: the folders a run writes and deletes inside (never through a link)
FOLDERS = ("init_model", "reference", "checkpoints", FOLDER, TENSORBOARD_FOLDER)


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
    problem = optimizer_problem(state, checkpoint / "policy")
    return (None, problem) if problem else (state, "")


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
            if not is_int(row_update) or (row_update > update) != cut:
                side = "cut" if cut else "keep"
                return (f"cutting {log} to {keep[log]} lines would {side} line {number}, a row "
                        f"of update {short(row_update)}, though the checkpoint is after update "
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
