"""The credit check's metrics: how well a method's step advantages rank the true value of each
action (docs/credit_check.md).

Pure functions of numbers: a method's advantages ``A [S]``, a truth ``g [S]`` (``NaN`` where
the truth was not estimated) and the batch's layout (which group and rollout each step
belongs to, which groups had mixed returns). Nothing here touches a model or an
environment; the truths are computed beside it (``truths``, ``token_truth``) and
enter as data.

Metrics, each with a 95% bootstrap interval that resamples groups:

- ``pooled``: Spearman ρ(A, g) over every step with a truth;
- ``pooled_signal``: the same over the steps of groups with mixed returns;
- ``within``: ρ inside each rollout with at least 3 steps and a non-constant truth, averaged
  over rollouts; a method constant in a rollout scores 0 there;
- ``sign`` / ``sign_balanced``: on steps with ``|g| ≥ θ``, the share where ``sign(A) =
  sign(g)`` (``A = 0`` never agrees), plain and as the mean of the positive and negative
  classes' shares.

Paired differences ``metric(X) − metric(Y)`` use the same bootstrap draws for both methods,
so they are much narrower than the two intervals side by side.

For a method that adds a correction to a base advantage (VICT: ``A^final = A^base +
λ·clip(A^VICT)``), ``corrected_sign``: at the steps where the correction is non-zero and
``|g| ≥ θ``, the share where ``sign(correction) = sign(g)`` against the share where
``sign(A^base) = sign(g)`` (0 agrees with nothing, as in ``sign``), and their paired
difference, on the same draws.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

#: the metrics of one method against one truth, in table order.
METRICS = ("pooled", "pooled_signal", "within", "sign", "sign_balanced")
#: the metrics a paired difference is reported for.
PAIRED_METRICS = ("pooled", "pooled_signal", "within")
#: the name of the chance row: i.i.d. standard normal numbers, one per step.
RANDOM_ROW = "random"
#: a rollout needs this many steps with a truth for its within-rollout ρ.
MIN_ROLLOUT_STEPS = 3


@dataclass(frozen=True)
class StepLayout:
    """Where each flat step of a batch belongs.

    Attributes:
        step_group: ``[S]`` int, the dense group ``0..G-1`` of each step.
        step_rollout: ``[S]`` int, the rollout of each step (contiguous, in time order).
        group_signal: ``[G]`` bool, the group's returns are not all equal.
    """

    step_group: np.ndarray
    step_rollout: np.ndarray
    group_signal: np.ndarray

    def __post_init__(self) -> None:
        for name in ("step_group", "step_rollout", "group_signal"):
            object.__setattr__(self, name, np.asarray(getattr(self, name)))
        if self.step_group.shape != self.step_rollout.shape or self.step_group.ndim != 1:
            raise ValueError(
                f"StepLayout: step_group has shape {self.step_group.shape} and step_rollout "
                f"{self.step_rollout.shape}; pass one group and one rollout per step.")
        if self.step_group.size and self.step_group.max() >= self.group_signal.size:
            raise ValueError(
                f"StepLayout: step_group names group {int(self.step_group.max())} but "
                f"group_signal has {self.group_signal.size} groups; pass one flag per group.")

    @property
    def num_steps(self) -> int:
        """``S``."""
        return int(self.step_group.size)

    @property
    def num_groups(self) -> int:
        """``G``."""
        return int(self.group_signal.size)

    @classmethod
    def from_lists(cls, rollout_groups: Sequence[int], rollout_lengths: Sequence[int],
                   rollout_returns: Sequence[float], tol: float = 1e-6) -> StepLayout:
        """The layout of rollouts given by their group ids, step counts and returns; a group has
        signal when its returns' population std exceeds ``tol``."""
        ids, dense = np.unique(np.asarray(rollout_groups), return_inverse=True)
        lengths = np.asarray(rollout_lengths, dtype=np.int64)
        returns = np.asarray(rollout_returns, dtype=np.float64)
        signal = np.array([returns[dense == g].std() > tol for g in range(ids.size)], dtype=bool)
        step_rollout = np.repeat(np.arange(lengths.size), lengths)
        return cls(dense[step_rollout], step_rollout, signal)


@dataclass(frozen=True)
class TruthValues:
    """One truth's values on a batch's steps.

    Attributes:
        values: ``[S]`` float, ``g_t`` per step; ``NaN`` where it was not estimated.
        threshold: ``θ``: the sign metrics count steps with ``|g| ≥ θ`` (clearly non-zero).
    """

    values: np.ndarray
    threshold: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", np.asarray(self.values, dtype=np.float64))
        if not self.threshold > 0:
            raise ValueError(f"TruthValues.threshold = {self.threshold}; it must be > 0 "
                             "(the smallest |g| the sign metrics count as clearly non-zero).")


def rank(x: np.ndarray) -> np.ndarray:
    """Ranks ``1..n`` of ``x``, ties sharing their average rank."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return (ends - (counts - 1) / 2.0)[inverse]


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson r, 0 when either side is constant or there are fewer than 2 points."""
    if x.size < 2:
        return 0.0
    dx, dy = x - x.mean(), y - y.mean()
    norm = np.sqrt((dx * dx).sum() * (dy * dy).sum())
    return float((dx * dy).sum() / norm) if norm > 1e-12 else 0.0


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman ρ with average ranks for ties; 0 when either side is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"spearman: x has shape {x.shape} but y {y.shape}; pass aligned arrays.")
    return pearson(rank(x), rank(y)) if x.size >= 2 else 0.0


def within_rollout_rhos(advantages: np.ndarray, truth: np.ndarray, step_rollout: np.ndarray
                        ) -> np.ndarray:
    """``[B]``: Spearman ρ(A, g) inside each rollout, over its steps with a finite truth.

    ``NaN`` (left out of the average) where a rollout has fewer than ``MIN_ROLLOUT_STEPS``
    such steps or its truth is constant there; 0 where the method is constant and the truth
    is not.
    """
    num_rollouts = int(step_rollout.max()) + 1 if step_rollout.size else 0
    rhos = np.full(num_rollouts, np.nan)
    known = np.isfinite(truth)
    for i in range(num_rollouts):
        mask = (step_rollout == i) & known
        if mask.sum() < MIN_ROLLOUT_STEPS or np.ptp(truth[mask]) == 0:
            continue
        rhos[i] = spearman(advantages[mask], truth[mask])
    return rhos


@dataclass
class _Prepared:
    """One truth's steps and the per-group sums the bootstrap draws reuse."""

    steps: np.ndarray  # [S'] flat indices of the steps with a finite truth
    group_steps: list[np.ndarray]  # per group: positions into ``steps``
    group_signal: np.ndarray  # [G]
    truth: np.ndarray  # [S'] the truth on those steps
    threshold: float
    rollout_group: np.ndarray  # [B] group of each rollout


def _prepare(truth: TruthValues, layout: StepLayout) -> _Prepared:
    if truth.values.shape != (layout.num_steps,):
        raise ValueError(f"a truth has {truth.values.shape} values but the batch has "
                         f"{layout.num_steps} steps; pass one value per step (NaN if unknown).")
    steps = np.flatnonzero(np.isfinite(truth.values))
    groups = layout.step_group[steps]
    num_rollouts = int(layout.step_rollout.max()) + 1 if layout.num_steps else 0
    rollout_group = np.zeros(num_rollouts, dtype=np.int64)
    rollout_group[layout.step_rollout] = layout.step_group
    return _Prepared(steps, [np.flatnonzero(groups == g) for g in range(layout.num_groups)],
                     layout.group_signal, truth.values[steps], truth.threshold, rollout_group)


def _draw_positions(prep: _Prepared, draw: np.ndarray, signal_only: bool) -> np.ndarray:
    """Positions (into ``prep.steps``) of the steps of the drawn groups, with repeats."""
    parts = [prep.group_steps[g] for g in draw if not signal_only or prep.group_signal[g]]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _metric_draws(advantages: np.ndarray, prep: _Prepared, layout: StepLayout,
                  draws: np.ndarray) -> dict[str, np.ndarray]:
    """Each metric on every row of ``draws`` (``[n, k]`` group ids, repeats allowed)."""
    a = advantages[prep.steps]
    g = prep.truth
    # within-rollout: one ρ per rollout, summed per group
    rhos = within_rollout_rhos(advantages, _scatter(prep, layout), layout.step_rollout)
    counted = np.isfinite(rhos)
    rho_sum = np.bincount(prep.rollout_group[counted], weights=rhos[counted],
                          minlength=layout.num_groups)
    rho_count = np.bincount(prep.rollout_group[counted], minlength=layout.num_groups)
    # sign agreement: per group, agreeing and counted steps of each class
    clear = np.abs(g) >= prep.threshold
    agree = np.sign(a) == np.sign(g)
    step_groups = layout.step_group[prep.steps]
    sums = {name: np.bincount(step_groups[mask], minlength=layout.num_groups).astype(float)
            for name, mask in (("pos", clear & (g > 0)), ("neg", clear & (g < 0)),
                               ("pos_agree", clear & (g > 0) & agree),
                               ("neg_agree", clear & (g < 0) & agree))}
    out = {name: np.empty(draws.shape[0]) for name in METRICS}
    for d, draw in enumerate(draws):
        for name, signal_only in (("pooled", False), ("pooled_signal", True)):
            pos = _draw_positions(prep, draw, signal_only)
            out[name][d] = spearman(a[pos], g[pos]) if pos.size >= 2 else np.nan
        counts = np.bincount(draw, minlength=layout.num_groups)
        n = (counts * rho_count).sum()
        out["within"][d] = (counts * rho_sum).sum() / n if n else np.nan
        tot = {k: (counts * v).sum() for k, v in sums.items()}
        clear_n = tot["pos"] + tot["neg"]
        out["sign"][d] = (tot["pos_agree"] + tot["neg_agree"]) / clear_n if clear_n else np.nan
        shares = [tot[f"{c}_agree"] / tot[c] for c in ("pos", "neg") if tot[c]]
        out["sign_balanced"][d] = float(np.mean(shares)) if shares else np.nan
    return out


def _scatter(prep: _Prepared, layout: StepLayout) -> np.ndarray:
    """The truth back on all ``S`` steps, NaN where unknown."""
    values = np.full(layout.num_steps, np.nan)
    values[prep.steps] = prep.truth
    return values


@dataclass
class AccuracyTable:
    """Every method against every truth, plus the paired differences.

    Attributes:
        rows: one per method × truth × metric: ``method``, ``truth``, ``metric``, ``value``
            (on the whole batch), ``low`` / ``high`` (95% bootstrap interval over groups).
        pairs: one per compared pair × truth × metric: ``method``, ``versus``, ``truth``,
            ``metric``, ``diff`` (method − versus), ``low``, ``high``.
        truths: per truth, ``steps`` (with a value), ``groups`` (with such steps),
            ``signal_groups`` and ``clear_steps`` (``|g| ≥ θ``).
        corrected: one per corrected method × truth (``corrected_sign``): ``method``,
            ``truth``, ``steps`` (corrected steps with ``|g| ≥ θ``), ``correction`` and
            ``base`` (their sign agreement) with ``…_low`` / ``…_high``, ``diff``
            (correction − base) with ``low`` / ``high``.
        boots: the number of bootstrap draws.
    """

    rows: list[dict] = field(default_factory=list)
    pairs: list[dict] = field(default_factory=list)
    truths: dict[str, dict] = field(default_factory=dict)
    corrected: list[dict] = field(default_factory=list)
    boots: int = 0

    def value(self, method: str, truth: str, metric: str) -> float:
        """The point value of one row (a ``KeyError`` names what is missing)."""
        for row in self.rows:
            if (row["method"], row["truth"], row["metric"]) == (method, truth, metric):
                return row["value"]
        raise KeyError(f"no row for method {method!r}, truth {truth!r}, metric {metric!r}")

    def pair(self, method: str, versus: str, truth: str, metric: str) -> dict:
        """One paired-difference row (a ``KeyError`` names what is missing)."""
        for row in self.pairs:
            if (row["method"], row["versus"], row["truth"], row["metric"]) == (
                    method, versus, truth, metric):
                return row
        raise KeyError(f"no pair {method!r} − {versus!r} for truth {truth!r}, metric {metric!r}")

    def to_dict(self) -> dict:
        """Plain JSON-ready data."""
        return {"rows": self.rows, "pairs": self.pairs, "truths": self.truths,
                "corrected": self.corrected, "boots": self.boots}


def _interval(samples: np.ndarray) -> tuple[float | None, float | None]:
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return None, None
    low, high = np.quantile(finite, [0.025, 0.975])
    return float(low), float(high)


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _corrected_sign_draws(correction: np.ndarray, base: np.ndarray, prep: _Prepared,
                         layout: StepLayout, draws: np.ndarray
                         ) -> tuple[int, dict[str, np.ndarray]]:
    """Sign agreement at the corrected steps on every row of ``draws`` (``[n, k]`` group ids).

    ``correction [S]`` is ``λ·clip(A^VICT)``, ``base [S]`` is ``A^base``. Counted: the steps
    with a finite truth, ``correction ≠ 0`` and ``|g| ≥ θ``; a sign of 0 agrees with nothing
    (``np.sign(0) = 0 ≠ sign(g)``). Returns the number of counted steps on the batch and,
    per draw, ``correction`` and ``base`` (the share of counted steps whose sign agrees with
    ``g``) and ``diff`` = correction − base, NaN where a draw counts no step.
    """
    g = prep.truth
    counted = (correction[prep.steps] != 0) & (np.abs(g) >= prep.threshold)  # [S']
    step_groups = layout.step_group[prep.steps]
    per_group = {name: np.bincount(step_groups[mask], minlength=layout.num_groups).astype(float)
                 for name, mask in (
                     ("n", counted),
                     ("correction", counted & (np.sign(correction[prep.steps]) == np.sign(g))),
                     ("base", counted & (np.sign(base[prep.steps]) == np.sign(g))))}  # [G]
    counts = np.zeros((draws.shape[0], layout.num_groups))
    np.add.at(counts, (np.arange(draws.shape[0])[:, None], draws), 1.0)  # [n, G]
    n = counts @ per_group["n"]  # [n]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {k: np.where(n > 0, counts @ per_group[k] / n, np.nan)
               for k in ("correction", "base")}
    out["diff"] = out["correction"] - out["base"]
    return int(counted.sum()), out


def accuracy_table(advantages: Mapping[str, np.ndarray], truths: Mapping[str, TruthValues],
                   layout: StepLayout, pairs: Sequence[tuple[str, str]] = (), *,
                   corrections: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
                   boots: int = 1000, seed: int = 0, random_row: bool = True) -> AccuracyTable:
    """Score every method's step advantages against every truth (see the module docstring).

    Args:
        advantages: method name -> ``[S]`` step advantages, aligned with ``layout``.
        truths: truth name -> its values on the same steps.
        layout: the batch's groups and rollouts.
        pairs: ``(method, versus)`` pairs whose paired differences are reported; a pair
            naming a method not in ``advantages`` (or the random row) is an error.
        corrections: method name -> ``(correction [S], A^base [S])`` for the methods whose
            advantage is a base plus a correction (VICT: ``result.extras["correction"]`` and
            ``["base_advantage"]``); each gets ``corrected_sign`` rows (module docstring).
        boots: bootstrap draws of groups (with replacement), shared by every method.
        seed: seeds the draws and the random row.
        random_row: add the chance row ``RANDOM_ROW`` (i.i.d. normal numbers).
    """
    rng = np.random.default_rng(seed)
    methods, corrections = _checked_inputs(advantages, layout, pairs, corrections, rng,
                                           random_row)
    table = AccuracyTable(boots=boots)
    for truth_name, truth in truths.items():
        prep = _prepare(truth, layout)
        groups = np.asarray([g for g in range(layout.num_groups) if prep.group_steps[g].size],
                            dtype=np.int64)
        table.truths[truth_name] = {
            "steps": int(prep.steps.size), "groups": int(groups.size),
            "signal_groups": int(prep.group_signal[groups].sum()),
            "clear_steps": int((np.abs(prep.truth) >= prep.threshold).sum()),
            "threshold": truth.threshold}
        if groups.size == 0:
            continue
        # row 0 is the batch itself; then draws among the groups this truth covers, the same
        # draws for every method, so paired differences are paired
        draws = np.concatenate([groups[None, :], groups[rng.integers(
            0, groups.size, size=(boots, groups.size))]])
        _score_truth(table, truth_name, prep, layout, draws, methods, pairs, corrections)
    return table


def _checked_inputs(advantages: Mapping[str, np.ndarray], layout: StepLayout,
                    pairs: Sequence[tuple[str, str]],
                    corrections: Mapping[str, tuple[np.ndarray, np.ndarray]] | None,
                    rng: np.random.Generator, random_row: bool
                    ) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The methods' ``[S]`` float64 advantages (plus the chance row ``RANDOM_ROW``, drawn
    from ``rng``, when ``random_row``) and the ``(correction [S], A^base [S])`` pairs, after
    checking every length against ``layout`` and that every pair names a method."""
    methods = {name: np.asarray(a, dtype=np.float64) for name, a in advantages.items()}
    if random_row:
        if RANDOM_ROW in methods:
            raise ValueError(f"a method is named {RANDOM_ROW!r}, the chance row's name; rename it "
                             "or pass random_row=False.")
        methods[RANDOM_ROW] = rng.standard_normal(layout.num_steps)
    for name, a in methods.items():
        if a.shape != (layout.num_steps,):
            raise ValueError(f"method {name!r} has {a.shape} advantages but the batch has "
                             f"{layout.num_steps} steps; pass one advantage per step.")
    corrections = {name: (np.asarray(c, dtype=np.float64), np.asarray(b, dtype=np.float64))
                   for name, (c, b) in (corrections or {}).items()}
    for name, arrays in corrections.items():
        if any(a.shape != (layout.num_steps,) for a in arrays):
            raise ValueError(f"method {name!r}: its correction and base have shapes "
                             f"{[a.shape for a in arrays]} but the batch has {layout.num_steps} "
                             "steps; pass one value per step for both.")
    for pair in pairs:
        missing = [m for m in pair if m not in methods]
        if missing:
            raise ValueError(f"paired difference {pair[0]!r} − {pair[1]!r}: no advantages for "
                             f"{missing[0]!r}; add it to the methods or drop the pair.")
    return methods, corrections


def _score_truth(table: AccuracyTable, truth_name: str, prep: _Prepared, layout: StepLayout,
                 draws: np.ndarray, methods: Mapping[str, np.ndarray],
                 pairs: Sequence[tuple[str, str]],
                 corrections: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Append one truth's rows, paired differences and ``corrected_sign`` rows to ``table``:
    each value on ``draws[0]`` (the batch) with its 95% interval over ``draws[1:]``
    (``[boots + 1, k]`` group ids)."""
    scored = {}
    for name, a in methods.items():
        scored[name] = _metric_draws(a, prep, layout, draws)
        for metric in METRICS:
            low, high = _interval(scored[name][metric][1:])
            table.rows.append({"method": name, "truth": truth_name, "metric": metric,
                               "value": _finite(scored[name][metric][0]), "low": low,
                               "high": high})
    for method, versus in pairs:
        for metric in PAIRED_METRICS:
            diff = scored[method][metric] - scored[versus][metric]
            low, high = _interval(diff[1:])
            table.pairs.append({"method": method, "versus": versus, "truth": truth_name,
                                "metric": metric, "diff": _finite(diff[0]), "low": low,
                                "high": high})
    for name, (correction, base) in corrections.items():
        steps, shares = _corrected_sign_draws(correction, base, prep, layout, draws)
        row = {"method": name, "truth": truth_name, "steps": steps}
        for key, values in shares.items():
            low, high = _interval(values[1:])
            prefix = "" if key == "diff" else f"{key}_"
            row.update({key: _finite(values[0]), f"{prefix}low": low,
                        f"{prefix}high": high})
        table.corrected.append(row)

def format_table(table: AccuracyTable, truths: Sequence[str] | None = None) -> str:
    """The table as text: one line per method and truth, then the paired differences."""
    names = list(truths or table.truths)
    lines = []

    def cell(value, low, high) -> str:
        if value is None:
            return f"{'-':>21}"
        interval = "" if low is None else f" [{low:+.2f},{high:+.2f}]"
        return f"{value:+.3f}{interval}".rjust(21)

    for truth in names:
        info = table.truths[truth]
        lines.append(f"truth {truth}: {info['steps']} steps, {info['groups']} groups "
                     f"({info['signal_groups']} with signal), {info['clear_steps']} steps with "
                     f"|g| >= {info['threshold']:g}")
        lines.append(f"{'method':<28}" + "".join(f"{m:>21}" for m in METRICS))
        methods = list(dict.fromkeys(r["method"] for r in table.rows if r["truth"] == truth))
        for method in methods:
            cells = {r["metric"]: r for r in table.rows
                     if r["truth"] == truth and r["method"] == method}
            lines.append(f"{method:<28}" + "".join(
                cell(cells[m]["value"], cells[m]["low"], cells[m]["high"]) for m in METRICS))
        pairs = [p for p in table.pairs if p["truth"] == truth]
        if pairs:
            lines.append(f"{'paired difference':<40}" + "".join(f"{m:>21}"
                                                                for m in PAIRED_METRICS))
            keys = list(dict.fromkeys((p["method"], p["versus"]) for p in pairs))
            for method, versus in keys:
                cells = {p["metric"]: p for p in pairs
                         if (p["method"], p["versus"]) == (method, versus)}
                lines.append(f"{method + ' - ' + versus:<40}" + "".join(
                    cell(cells[m]["diff"], cells[m]["low"], cells[m]["high"])
                    for m in PAIRED_METRICS))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
