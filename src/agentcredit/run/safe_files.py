"""Run files opened as regular files only: never through a symlink, never a FIFO or device.

A run folder can be shared or handed over, so what lies in it is not trusted: a
``.lock`` or ``config.yaml`` that is a symlink would make a run truncate or overwrite
the file it points to, and a FIFO in place of a log would block a reader or fail
deep inside Python with "not seekable". Every file a run or the report opens goes
through ``open_regular`` (``O_NOFOLLOW``, then ``fstat``): a symlink or a special
file is refused with one ``UnsafeRunFile`` naming the file and what it is.
``read_regular`` also bounds how much is read, so a huge file cannot fill memory.
A file the user names on the command line (``--config FILE``) is opened with ``follow``:
that link is the user's own choice, followed as any command-line tool follows it, but what
it leads to must still be a regular file within the bound.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))


class UnsafeRunFile(OSError):
    """A run file that is a symlink, a special file or too large; the message names it."""


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (``"a FIFO"``), for a refusal."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def refusal(path: str | Path) -> str:
    """Why ``path`` may not be opened as a run file (a symlink, a special file), or ``""``
    (also for a path that does not exist)."""
    path = Path(path)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return ""
    if stat.S_ISLNK(mode):
        return (f"{path} is a symlink (to {os.readlink(path)}); run files are never opened "
                "through links: put the file itself there")
    if not stat.S_ISREG(mode):
        return (f"{path} is {kind_of(mode)}, not a regular file; replace it with the file "
                "itself")
    return ""


def open_regular(path: str | Path, flags: int = os.O_RDONLY, mode: int = 0o644,
                 follow: bool = False) -> int:
    """``os.open(path, flags)`` without following a symlink at ``path`` (unless ``follow``:
    a file the user named, whose link they chose); the descriptor of a regular file.

    Raises:
        UnsafeRunFile: ``path`` is a symlink or a special file (nothing was read or written);
            with ``follow``, what the link leads to is a special file.
        OSError: as ``os.open`` (a missing file without ``O_CREAT``).
    """
    no_follow = 0 if follow else os.O_NOFOLLOW
    try:  # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer
        fd = os.open(path, flags | no_follow | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UnsafeRunFile(refusal(path) or f"{path} is a symlink; run files are never "
                                "opened through links") from None
        raise
    file_mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(file_mode):
        os.close(fd)
        raise UnsafeRunFile(f"{path} is {kind_of(file_mode)}, not a regular file; replace it "
                            "with the file itself")
    os.set_blocking(fd, True)
    return fd


def read_regular(path: str | Path, limit: int, follow: bool = False) -> bytes:
    """The bytes of the regular file ``path`` (see ``open_regular``; ``follow`` as there), at
    most ``limit`` of them.

    Raises:
        UnsafeRunFile: a symlink, a special file, or a file of more than ``limit`` bytes.
        OSError: the file cannot be read.
    """
    fd = open_regular(path, follow=follow)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UnsafeRunFile(f"{path} holds {size:,} bytes, more than the {limit:,} this "
                                "file may have")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # it grew while being read
        raise UnsafeRunFile(f"{path} holds more than the {limit:,} bytes this file may have")
    return data
