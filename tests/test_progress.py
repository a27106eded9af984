"""The progress bar of long phases: redrawn on a terminal, a dozen plain lines in a log, silent
when switched off or outside ``reporting``."""

from __future__ import annotations

import io

from agentcredit import progress
from agentcredit.progress import Progress, reporting, track


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    """A settable monotonic clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _logged(label: str, total: int, unit: str, step_s: float, delay_s: float,
            **postfix: str) -> str:
    """What a log (not a terminal) gets from ``total`` updates ``step_s`` seconds apart."""
    log, clock = io.StringIO(), Clock()
    with Progress(label, total, unit=unit, enabled=True, stream=log, clock=clock,
                  delay_s=delay_s) as bar:
        for _ in range(total):
            clock.now += step_s
            bar.update(**postfix)
    return log.getvalue()


def test_a_log_gets_one_line_per_tenth_and_a_final_line_not_one_per_update():
    text = _logged("SFT", 1000, "steps", 0.01, 0, loss="0.500")
    lines = text.splitlines()
    assert "\r" not in text
    # the start line, one per tenth passed before the end (100 .. 900), the final line
    assert len(lines) == 1 + 9 + 1
    assert lines[0].startswith("SFT: 0/1000 steps (0%)")
    assert lines[5].startswith("SFT: 500/1000 steps (50%), 00:05 elapsed, ETA 00:05")
    assert lines[-1] == "SFT: 1000/1000 steps in 00:10, loss=0.500"


def test_a_log_line_comes_after_the_heartbeat_even_within_one_tenth():
    log, clock = io.StringIO(), Clock()
    bar = Progress("eval", 100, unit="games", enabled=True, stream=log, clock=clock, delay_s=0)
    clock.now += 1
    bar.update()  # passes 1 % of the total: not a tenth, not a heartbeat
    assert len(log.getvalue().splitlines()) == 1
    clock.now += progress.HEARTBEAT_S
    bar.update()
    assert log.getvalue().splitlines()[-1].startswith("eval: 2/100 games (2%)")


def test_a_phase_shorter_than_the_delay_prints_nothing():
    assert _logged("train games", 240, "games", 0.001, 1.0) == ""


def test_a_terminal_gets_a_bar_redrawn_in_place():
    screen = Terminal()
    with Progress("updates", 4, unit="updates", enabled=True, stream=screen, delay_s=0) as bar:
        for _ in range(4):
            bar.update(success="0.50")
    out = screen.getvalue()
    assert "\r" in out and "updates" in out and "4/4" in out and "success=0.50" in out
    assert out.count("\n") == 1  # one finished bar left on screen, not one line per update


def test_disabled_bars_and_bars_outside_reporting_write_nothing():
    screen, log = Terminal(), io.StringIO()
    for stream in (screen, log):
        with Progress("SFT", 3, enabled=False, stream=stream, delay_s=0) as bar:
            bar.update(3)
        with Progress("SFT", 3, stream=stream, delay_s=0) as bar:  # no reporting(): off
            bar.update(3)
        with reporting(False), Progress("SFT", 3, stream=stream, delay_s=0) as bar:
            bar.update(3)
    assert screen.getvalue() == log.getvalue() == ""


def test_reporting_switches_bars_on_inside_its_block_only():
    log = io.StringIO()
    with reporting(True), Progress("inside", 1, stream=log, delay_s=0) as bar:
        bar.update()
    with Progress("outside", 1, stream=log, delay_s=0) as bar:
        bar.update()
    assert "inside: 1/1" in log.getvalue() and "outside" not in log.getvalue()


def test_a_phase_that_fails_prints_no_final_line():
    log = io.StringIO()
    try:
        with Progress("SFT", 10, enabled=True, stream=log, delay_s=0) as bar:
            bar.update()
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert " in " not in log.getvalue()


def test_track_counts_each_item_once_the_caller_is_done_with_it(monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    with reporting(True):
        seen = list(track(["a", "b", "c"], "expert demonstrations", unit="episodes"))
    assert seen == ["a", "b", "c"]
    counts = [line.split()[2] for line in capsys.readouterr().err.splitlines()]
    assert counts == ["0/3", "1/3", "2/3", "3/3"]  # the start, each finished item, the end


def test_a_total_learned_late_is_shown(monkeypatch):
    log = io.StringIO()
    with Progress("SFT", 0, unit="steps", enabled=True, stream=log, delay_s=0) as bar:
        for _ in range(5):
            bar.update(total=5)
    assert log.getvalue().splitlines()[-1].startswith("SFT: 5/5 steps in ")
