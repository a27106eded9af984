"""Progress bars on stderr for the phases of a run that take long.

A phase opens ``Progress(label, total)`` (or loops over ``track(items, label)``) and
counts finished work with ``update``. Whether anything is shown is decided once per
run: ``train`` wraps the run in ``reporting(config.run.progress)``, so the phases deep
inside it (game generation, expert demonstrations, SFT, evaluation, RL updates) need
no flag passed down. Outside ``reporting(True)`` nothing is shown, so library calls,
benchmarks and tests stay quiet.

On a terminal the bar is tqdm's, redrawn in place with ``\\r``. When stderr is not a
terminal (a log file, CI) the bar is plain lines: one when the count passes another
tenth of the total, one ``HEARTBEAT_S`` after the last line, one at the end; so a
log holds about a dozen lines per phase. A bar that ends within ``DELAY_S`` of its
start shows nothing (cached games load without a line), unless the phase asks for
``delay_s=0``.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import Self, TextIO, TypeVar

from tqdm import tqdm

#: seconds a bar waits before its first line or redraw
DELAY_S = 1.0
#: seconds after which a plain-line bar prints again even if no tenth was passed
HEARTBEAT_S = 30.0

_SHOWN: ContextVar[bool] = ContextVar("agentcredit_progress_shown", default=False)
T = TypeVar("T")


@contextlib.contextmanager
def reporting(enabled: bool) -> Iterator[None]:
    """Show (``enabled``) or hide every bar opened inside the ``with`` block."""
    token = _SHOWN.set(enabled)
    try:
        yield
    finally:
        _SHOWN.reset(token)


class Progress:
    """One phase's bar: ``label``, ``count/total unit``, elapsed time, ETA and a postfix.

    Args:
        label: the phase (``SFT``, ``eval``); the first word of every line.
        total: units of work in the phase.
        unit: what is counted (``games``, ``steps``).
        initial: units already done (a resumed run's updates).
        delay_s: show nothing before this many seconds (default ``DELAY_S``); 0 prints a
            start line at once.
        enabled: override the ``reporting`` switch (tests).
        stream: where to write (default: ``sys.stderr`` when the bar opens).
        clock: seconds, monotonic (tests pass a fake one).
    """

    def __init__(self, label: str, total: int, *, unit: str = "it", initial: int = 0,
                 delay_s: float | None = None, enabled: bool | None = None,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self.label, self.total, self.unit = label, total, unit
        self.initial = self.count = initial
        self.enabled = _SHOWN.get() if enabled is None else enabled
        self.delay_s = DELAY_S if delay_s is None else delay_s
        self.postfix = ""
        self._stream = sys.stderr if stream is None else stream
        self._clock = clock
        self._began = clock()
        self._last: tuple[int, float] | None = None  # (count, time) of the last plain line
        self._tqdm: tqdm | None = None
        if self.enabled and _is_terminal(self._stream):
            self._tqdm = tqdm(total=total, initial=initial, desc=label, unit=f" {unit}",
                              file=self._stream, delay=self.delay_s, dynamic_ncols=True)
        elif self.enabled and self.delay_s <= 0 and total > 0:
            self._line(self._began)

    def update(self, n: int = 1, *, total: int | None = None, **postfix: object) -> None:
        """Count ``n`` more units done; ``postfix`` (``loss=0.41``) is shown after the count.
        ``total`` sets the total of a phase that learns it only once it runs (SFT's steps)."""
        self.count += n
        if total is not None:
            self.total = total
            if self._tqdm is not None:
                self._tqdm.total = total
        if postfix:
            self.postfix = ", ".join(f"{key}={value}" for key, value in postfix.items())
        if not self.enabled:
            return
        if self._tqdm is not None:
            if postfix:
                self._tqdm.set_postfix(postfix, refresh=False)
            self._tqdm.update(n)
            return
        now = self._clock()
        if self.count < self.total and now - self._began >= self.delay_s and self._due(now):
            self._line(now)

    def close(self, finished: bool = True) -> None:
        """End the bar; a plain-line bar that was shown (or outlived the delay) prints its
        final line when ``finished``."""
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
        elif self.enabled and finished:
            now = self._clock()
            if self._last is not None or now - self._began >= self.delay_s:
                self._write(f"{self.label}: {self.count}/{self.total} {self.unit} in "
                            f"{tqdm.format_interval(now - self._began)}{self._suffix()}")
        self.enabled = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        self.close(finished=kind is None)

    def _due(self, now: float) -> bool:
        if self._last is None:
            return True
        count, at = self._last
        tenth = max(1, math.ceil(self.total / 10))
        return self.count // tenth > count // tenth or now - at >= HEARTBEAT_S

    def _line(self, now: float) -> None:
        self._last = (self.count, now)
        elapsed = now - self._began
        pct = f" ({100 * self.count / self.total:.0f}%)" if self.total else ""
        done = self.count - self.initial
        eta = ("" if done <= 0 else
               f", ETA {tqdm.format_interval(elapsed / done * (self.total - self.count))}")
        self._write(f"{self.label}: {self.count}/{self.total} {self.unit}{pct}, "
                    f"{tqdm.format_interval(elapsed)} elapsed{eta}{self._suffix()}")

    def _suffix(self) -> str:
        return f", {self.postfix}" if self.postfix else ""

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


def track(items: Iterable[T], label: str, *, total: int | None = None, unit: str = "it"
          ) -> Iterator[T]:
    """Yield ``items`` with a bar that counts each one after the caller is done with it."""
    if total is None:
        total = len(items)  # type: ignore[arg-type]
    with Progress(label, total, unit=unit) as bar:
        for item in items:
            yield item
            bar.update()


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
