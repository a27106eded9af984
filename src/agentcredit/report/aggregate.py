"""A method's runs (one per seed) summarised: mean and spread over seeds, curves by update.

Every figure and table of the report reads runs through these functions, so they
agree on what "mean over seeds" means: the plain mean of the seeds that have a
value, the sample standard deviation as the spread (0 with one seed), and ``n``
the number of seeds behind each number, since a run still in progress adds
values only up to where it has got.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentcredit.report.run_files import RunData

Records = Callable[[RunData], list[dict[str, Any]]]


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation and count of some seeds' values."""

    mean: float
    sd: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary | None:
        """The summary of ``values``; ``None`` when there are none."""
        if not values:
            return None
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        return cls(statistics.fmean(values), sd, len(values))


def counted(n: int, noun: str) -> str:
    """``1 seed``, ``2 seeds``: ``n`` and ``noun``, plural unless ``n`` is 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def by_method(runs: Sequence[RunData]) -> dict[str, list[RunData]]:
    """Runs grouped by ``RunData.method``, methods in the order first seen."""
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        groups.setdefault(run.method, []).append(run)
    return groups


def updates(run: RunData) -> list[dict[str, Any]]:
    """The run's ``update`` lines (a ``Records`` reader)."""
    return run.updates


def evals(run: RunData) -> list[dict[str, Any]]:
    """The run's ``eval`` lines (a ``Records`` reader)."""
    return run.evals


def number(record: dict[str, Any], key: str) -> float | None:
    """``record[key]`` when it is a number (not a flag, not null), else ``None``."""
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def curve(run: RunData, records: Records, key: str) -> dict[int, float]:
    """``update → value`` of ``key`` in the run's records (the last line of an update wins)."""
    points = {}
    for record in records(run):
        value = number(record, key)
        if value is not None:
            points[record["update"]] = value
    return points


def seed_curve(runs: Sequence[RunData], records: Records, key: str
               ) -> list[tuple[int, Summary]]:
    """``(update, summary over seeds)`` at every update some seed logged ``key``."""
    curves = [curve(run, records, key) for run in runs]
    steps = sorted({u for c in curves for u in c})
    return [(u, Summary.of([c[u] for c in curves if u in c])) for u in steps]


def final(run: RunData, records: Records, key: str) -> float | None:
    """The last logged value of ``key``."""
    points = curve(run, records, key)
    return points[max(points)] if points else None


def auc_pct(points: dict[int, float]) -> float | None:
    """Area under a success curve over updates, as a percentage of the box from the first
    logged update to the last (trapezoids; one point: that value); ``None`` without points."""
    steps = sorted(points)
    if not steps:
        return None
    if len(steps) == 1:
        return 100.0 * points[steps[0]]
    area = sum((b - a) * (points[a] + points[b]) / 2 for a, b in itertools.pairwise(steps))
    return 100.0 * area / (steps[-1] - steps[0])


def mean_over_updates(run: RunData, key: str) -> float | None:
    """The mean of ``key`` over the run's update lines that have it."""
    values = [v for r in run.updates if (v := number(r, key)) is not None]
    return statistics.fmean(values) if values else None


def over_seeds(runs: Sequence[RunData], value: Callable[[RunData], float | None]
               ) -> Summary | None:
    """The summary over seeds of one number per run (runs without it left out)."""
    return Summary.of([v for run in runs if (v := value(run)) is not None])
