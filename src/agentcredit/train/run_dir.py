"""A run's folder on disk: creating and resuming it, its logs, checkpoints and RNG state.

::

    run_dir/
      config.yaml       the validated config
      metrics.jsonl     one line per SFT run, update and evaluation ("kind")
      ledger.jsonl      VICT credit rows (estimators that write a ledger)
      init_model/       the bootstrapped tiny model (embedded default only)
      reference/        the RL starting policy (after SFT), also the frozen KL reference
      checkpoints/update_NNNNN/{policy/, trainer_state.pt}
      rollouts/         saved updates for the report's viewer (run.save_rollouts)
      tensorboard/      TensorBoard events (run.tensorboard)

What a kill can leave, and what ``RunDirectory.resume`` does with it:

- a torn last line in ``metrics.jsonl`` or ``ledger.jsonl``: cut;
- a half-written checkpoint: it is written under a temporary name and renamed
  when complete, so it is never seen; a complete one that cannot be read
  (damaged weights or state) is skipped for the one before;
- a checkpoint newer than the logs (the logs lost lines the checkpoint counted):
  each checkpoint records how many lines each log had when it was written, so
  such a checkpoint is skipped for the one before;
- logs longer than the checkpoint: rolled back to the recorded line counts, and
  the resumed run rewrites those lines exactly.

Each fallback is said in one line. A run that died after its SFT warm start and
before its first checkpoint restarts RL from ``reference/``.

A process holds ``run_dir/.lock`` (an ``flock``) for the life of its run, so a
second run on the same folder stops at once, naming the holder. The kernel drops
the lock when its process dies, so a killed run's folder can be resumed at once.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agentcredit.jsonl_log import count_lines, read_jsonl, repair_torn_tail, truncate_lines
from agentcredit.train.live_metrics import TENSORBOARD_FOLDER
from agentcredit.train.saved_rollouts import FOLDER

CHECKPOINT_STATE = "trainer_state.pt"
LOGS = ("metrics.jsonl", "ledger.jsonl")


class RunDirectoryError(RuntimeError):
    """The run directory cannot be used as asked (exists already, or holds nothing to resume)."""


@dataclass
class RandomStreams:
    """Every random stream of a run.

    Attributes:
        task_rng: task sampling.
        sampling: a CPU generator for token sampling and mini-batch shuffles.
    The global python / numpy / torch states are saved and restored with them.
    """

    task_rng: random.Random
    sampling: torch.Generator

    @classmethod
    def seeded(cls, seed: int) -> RandomStreams:
        """Fresh streams, with the global python / numpy / torch states seeded too."""
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        return cls(random.Random(seed), torch.Generator().manual_seed(seed))

    def state(self) -> dict[str, Any]:
        """Everything ``restore`` needs."""
        return {"task_rng": self.task_rng.getstate(), "sampling": self.sampling.get_state(),
                "python_random": random.getstate(), "numpy_random": np.random.get_state(),
                "torch_random": torch.get_rng_state()}

    def restore(self, state: dict[str, Any]) -> None:
        """Set every stream to a saved ``state``."""
        self.task_rng.setstate(state["task_rng"])
        self.sampling.set_state(state["sampling"])
        random.setstate(state["python_random"])
        np.random.set_state(state["numpy_random"])
        torch.set_rng_state(state["torch_random"])


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
        fd = os.open(self.path / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
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
        for name in ("config.yaml", *LOGS, "init_model", "reference", ".tmp_reference",
                     "checkpoints", FOLDER, TENSORBOARD_FOLDER):
            target = self.path / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()

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
        """``rollouts/``, the saved updates (``train/saved_rollouts.py``)."""
        return self.path / FOLDER

    def create(self) -> None:
        """Make the folder for a new run; refuse one that already holds a run."""
        if self.metrics.exists() or self.checkpoints.exists() or self.reference.exists():
            raise RunDirectoryError(
                f"run directory {self.path} already holds a run; resume it with "
                f"`agentcredit train --resume {self.path}`, start it again with --overwrite, or "
                "choose another run.name=...")
        self.path.mkdir(parents=True, exist_ok=True)

    # RESUME

    def resume(self, echo: Callable[[str], None]) -> ResumePoint:
        """Repair the logs, pick the newest usable checkpoint, roll the logs back to it."""
        if not self.metrics.exists() and not self.reference.exists():
            raise RunDirectoryError(f"nothing to resume in {self.path}: it holds no run "
                                    "(start one without --resume)")
        for log in LOGS:
            if repair_torn_tail(self.path / log):
                echo(f"{log}: cut a torn last line")
        lines = {log: count_lines(self.path / log) for log in LOGS}
        for checkpoint in sorted(self.checkpoints.glob("update_*"), reverse=True):
            state, problem = _read_checkpoint(checkpoint)
            if state is not None:
                short = [log for log in LOGS if lines[log] < state["log_lines"][log]]
                if short:
                    problem = (f"{' and '.join(short)} ended before it (the logs lost lines "
                               "it counts)")
            if problem:
                echo(f"checkpoint {checkpoint.name} is unusable: {problem}; trying the one "
                     "before")
                continue
            for log in LOGS:
                truncate_lines(self.path / log, state["log_lines"][log])
            return ResumePoint(checkpoint / "policy", state["update"], state)
        if _is_model_dir(self.reference):
            sft_lines = _leading_kind(self.metrics, "sft")
            truncate_lines(self.metrics, sft_lines)
            truncate_lines(self.ledger, 0)
            echo(f"no usable checkpoint in {self.path}: restarting RL from reference/ "
                 "(the SFT warm start is kept)")
            return ResumePoint(self.reference, 0, None)
        raise RunDirectoryError(
            f"nothing to resume in {self.path}: it has no usable checkpoint and no finished "
            "SFT start (reference/); start it again with --overwrite")

    # CHECKPOINTS

    def save_reference(self, model, tokenizer) -> None:
        """Write ``reference/`` atomically (a kill leaves either nothing or all of it)."""
        tmp = self.path / ".tmp_reference"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        shutil.rmtree(self.reference, ignore_errors=True)
        tmp.rename(self.reference)

    def save_checkpoint(self, update: int, model, tokenizer, optimizer, streams: RandomStreams,
                        success_start: float | None, keep: int) -> Path:
        """Write ``checkpoints/update_NNNNN`` atomically and keep the newest ``keep``."""
        final = self.checkpoints / f"update_{update:05d}"
        tmp = self.checkpoints / f".tmp_update_{update:05d}"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp / "policy")
        tokenizer.save_pretrained(tmp / "policy")
        torch.save({"update": update, "success_start": success_start,
                    "optimizer": optimizer.state_dict(), "random": streams.state(),
                    "log_lines": {log: count_lines(self.path / log) for log in LOGS}},
                   tmp / CHECKPOINT_STATE)
        _fsync_tree(tmp)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in sorted(self.checkpoints.glob("update_*"))[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint folder, or None."""
        done = sorted(p for p in self.checkpoints.glob("update_*")
                      if (p / CHECKPOINT_STATE).is_file())
        return done[-1] if done else None


def _read_checkpoint(checkpoint: Path) -> tuple[dict | None, str]:
    """``(state, "")`` for a readable checkpoint, else ``(None, why not)``."""
    if not _is_model_dir(checkpoint / "policy"):
        return None, "its policy/ has no weights"
    try:
        state = torch.load(checkpoint / CHECKPOINT_STATE, weights_only=False)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
        return None, f"cannot read {CHECKPOINT_STATE} ({str(err).splitlines()[0]})"
    if not isinstance(state, dict) or "log_lines" not in state:
        return None, f"{CHECKPOINT_STATE} was written by another version"
    return state, ""


def _is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def _leading_kind(path: Path, kind: str) -> int:
    """How many records at the start of the JSONL ``path`` have ``kind``."""
    count = 0
    if not path.exists():
        return 0
    for record in read_jsonl(path):
        if record.get("kind") != kind:
            break
        count += 1
    return count


def _fsync_tree(root: Path) -> None:
    """Flush every file under ``root`` to disk before the checkpoint is renamed into place."""
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
