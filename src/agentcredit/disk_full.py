"""A full disk, said as such: every file a run writes is written inside ``writing(path)``.

A write on a full disk (or over a quota) fails deep inside Python, torch or
safetensors with a message that names no file (``[Errno 28] No space left on
device``) or does not say the disk is full (torch's ``unexpected pos ...``, which
``torch.save`` to a path raises: checkpoints are written through a Python file
object so that the error is the system's). A write that fails once torch's zip writer
has begun still ends in its ``RuntimeError`` (``[enforce fail at inline_container.cc]
... unexpected pos``), with the system's ``ENOSPC`` as its context: ``is_disk_full``
looks along that chain. ``writing`` turns any such failure into one ``DiskFullError``
naming the file; the CLI prints it as one ``error:`` line.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

_FULL = (errno.ENOSPC, errno.EDQUOT)
# how a failed write reads when it comes back from Rust (safetensors) rather than an OSError
_FULL_TEXT = ("No space left on device", "Disk quota exceeded")


class DiskFullError(OSError):
    """A write failed because the disk is full; the message names the file and what to do."""


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err``, or an error it was raised from or while handling (torch's zip
    writer masks the ``ENOSPC`` it met), is a write that failed for want of space."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _FULL:
            return True
        if any(text in str(err) for text in _FULL_TEXT):
            return True
        err = err.__cause__ or err.__context__
    return False


@contextlib.contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Raise ``DiskFullError`` naming ``path`` when the writes inside run out of space."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as err:
        if not is_disk_full(err):
            raise
        raise DiskFullError(f"cannot write {path}: the disk is full (no space left on device); "
                            "free space on it and run the command again (a training run "
                            "continues with agentcredit train --resume)") from None
