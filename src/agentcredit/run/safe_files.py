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

Writing is held to more: a file opened for writing must have one name only (a hard link
to a file outside the run would be written through), and every name a run creates (a
temporary file, a new folder) is created exclusively (``new_file``, ``new_folder``), so a
link planted at that name is refused by name instead of being written through; a folder a
run keeps writing into (``checkpoints/``, ``rollouts/``) must be a folder, not a link
(``own_folder``). ``remove_name`` deletes a name without following it.

A command's output file (``report -o``, ``credit-check -o``, ``eval``'s result) is held to the
same: ``output_refusal`` refuses, before any work, a name that is a link, a special file or a
file of two names, a folder that does not exist (a command makes no folders for a mistyped
path) and, inside a run folder, a folder on the way that is a link; ``write_output`` then
writes a new file and renames it over the name, so a link planted after the check is replaced,
never written through.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))


class UnsafeRunFile(OSError):
    """A run file that is a symlink, a special file or too large; the message names it."""


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (``"a FIFO"``), for a refusal."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def refusal(path: str | Path, written: bool = False) -> str:
    """Why ``path`` may not be opened as a run file (a symlink, a special file; with
    ``written``, a file of more than one name), or ``""`` (also for a path that does not
    exist)."""
    path = Path(path)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return ""
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return (f"{path} is a symlink (to {os.readlink(path)}); run files are never opened "
                "through links: put the file itself there")
    if not stat.S_ISREG(mode):
        return (f"{path} is {kind_of(mode)}, not a regular file; replace it with the file "
                "itself")
    if written and info.st_nlink > 1:
        return _shared(path, info.st_nlink)
    return ""


def _shared(path: Path, names: int) -> str:
    return (f"{path} has {names} hard links (another name shares its bytes, and a run would "
            "write through to it); put a copy of its own in its place (cp it to a new name, "
            "then mv that over it)")


def open_regular(path: str | Path, flags: int = os.O_RDONLY, mode: int = 0o644,
                 follow: bool = False) -> int:
    """``os.open(path, flags)`` without following a symlink at ``path`` (unless ``follow``:
    a file the user named, whose link they chose); the descriptor of a regular file (of one
    name only when ``flags`` write).

    Raises:
        UnsafeRunFile: ``path`` is a symlink, a special file or, opened for writing, a file
            with another hard link (nothing was read or written); with ``follow``, what the
            link leads to is a special file.
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
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafeRunFile(f"{path} is {kind_of(info.st_mode)}, not a regular file; replace "
                            "it with the file itself")
    if flags & (os.O_WRONLY | os.O_RDWR) and info.st_nlink > 1:
        os.close(fd)
        raise UnsafeRunFile(_shared(Path(path), info.st_nlink))
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


def remove_name(path: str | Path) -> None:
    """Delete ``path`` without following it: a link or a file is unlinked, a folder removed
    with what it holds (``shutil.rmtree`` unlinks the links inside); a missing path is a
    no-op."""
    path = Path(path)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)
    else:
        path.unlink()


def clear_name(path: str | Path) -> None:
    """Make way for a new file or folder at ``path``: what a killed run left there (a file,
    a folder) is deleted; a symlink or special file is refused, not followed or deleted.

    Raises:
        UnsafeRunFile: ``path`` is a symlink or a special file (the message names it).
    """
    path = Path(path)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise UnsafeRunFile(refusal(path) + " (a run creates this name itself)")
    remove_name(path)


def new_file(path: str | Path) -> int:
    """A descriptor, open for writing, of the file ``path`` created here and now
    (``O_CREAT | O_EXCL``: never a file or link already there; ``clear_name`` first).

    Raises:
        UnsafeRunFile: ``path`` is a symlink or a special file, or one appeared there.
    """
    clear_name(path)
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o644)
    except FileExistsError:
        raise UnsafeRunFile(f"{path} appeared while the run was creating it; another process "
                            "is writing in the run directory: stop it") from None


def new_folder(path: str | Path) -> Path:
    """``path`` created here and now as an empty folder (``clear_name`` first); returns it.

    Raises:
        UnsafeRunFile: ``path`` is a symlink or a special file, or one appeared there.
    """
    clear_name(path)
    try:
        os.mkdir(path)
    except FileExistsError:
        raise UnsafeRunFile(f"{path} appeared while the run was creating it; another process "
                            "is writing in the run directory: stop it") from None
    return Path(path)


def own_folder(path: str | Path) -> Path:
    """``path`` as a folder the run writes into, created if missing (with its parents, the
    run folder, as ``mkdir -p`` would); returns it.

    Raises:
        UnsafeRunFile: ``path`` is a symlink (writing into it would write, and delete, where
            it leads) or not a folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path)
    except FileExistsError:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            raise UnsafeRunFile(f"{path} is a symlink (to {os.readlink(path)}); a run writes "
                                "and deletes inside this folder, so it never follows a link "
                                "here: remove the link (the run makes the folder)") from None
        if not stat.S_ISDIR(mode):
            what = "a file" if stat.S_ISREG(mode) else kind_of(mode)
            raise UnsafeRunFile(f"{path} is {what}, not a folder; remove it (the run makes the "
                                "folder)") from None
    return path


def write_new(path: str | Path, data: bytes, tmp: str | Path) -> None:
    """Put ``data`` at ``path`` atomically: written to ``tmp`` (``new_file``), flushed to
    disk, then renamed over ``path`` (which replaces a link there, never what it leads to).
    A write or rename that fails deletes ``tmp`` (a full disk keeps nothing of it).

    Raises:
        UnsafeRunFile: ``tmp`` is a symlink or a special file.
        OSError: the write fails (callers wrap it in ``disk_full.writing``).
    """
    fd = new_file(tmp)
    try:
        try:
            view = memoryview(data)
            while view:  # os.write may write less than asked
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        remove_name(tmp)  # created here: a regular file of ours, never a link
        raise


def output_refusal(path: str | Path, within: Sequence[str | Path] = ()) -> str:
    """Why a command may not write its output file ``path``, or ``""``: its folder does not
    exist or is not a folder; inside one of ``within`` (the run folders the command reads), a
    folder between that run folder and ``path`` is a symlink; ``path`` is a symlink, a special
    file or a file with another hard link (written through, it would change a file elsewhere).
    The clause names the path and what to do."""
    path = Path(os.path.abspath(path))
    folder = path.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        return f"the folder {folder} {what}; create it first or write elsewhere"
    for root in (Path(os.path.abspath(r)) for r in within):
        if not folder.is_relative_to(root):
            continue
        step = root
        for part in folder.relative_to(root).parts:
            step = step / part
            if step.is_symlink():
                return (f"{step} is a symlink (to {os.readlink(step)}) inside the run folder "
                        f"{root}; nothing is written through a link in a run folder: remove "
                        "the link or write elsewhere")
    try:
        info = path.lstat()
    except FileNotFoundError:
        return ""
    if stat.S_ISLNK(info.st_mode):
        return (f"{path} is a symlink (to {os.readlink(path)}); an output is never written "
                "through a link: remove the link or write elsewhere")
    if not stat.S_ISREG(info.st_mode):
        return (f"{path} is {kind_of(info.st_mode)}, not a regular file; an output is written "
                "as a file of its own: move it away or write elsewhere")
    if info.st_nlink > 1:
        return (f"{path} has {info.st_nlink} hard links (another name shares its bytes); an "
                "output is never written through to another name: remove it or write elsewhere")
    return ""


def write_output(path: str | Path, data: bytes) -> None:
    """Put ``data`` at the output file ``path`` as ``write_new`` does (through the temporary
    name ``.NAME.tmp`` beside it, created exclusively, then renamed over ``path``).

    Raises:
        UnsafeRunFile: the temporary name is a symlink or a special file.
        OSError: the write fails (callers wrap it in ``disk_full.writing``).
    """
    path = Path(path)
    write_new(path, data, path.with_name(f".{path.name}.tmp"))
