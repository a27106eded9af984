"""Success with its uncertainty: each game's outcome read from an ``eval`` line, percentile
bootstrap intervals over games (and seeds), and the before/after lines ``agentcredit train``
prints.

An ``eval`` line (``train.evaluation.evaluate.evaluate``) holds ``eval/{split}/won``, one digit
per game (its episodes won), and ``eval/{split}/episodes_per_game``; a game's outcome is its
share of episodes won. The same games in the same order are evaluated at every evaluation of a
run, so two lines compare game by game.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from agentcredit.config.environment import POOL


def evaluated_splits(evaluation: Mapping) -> list[str]:
    """The splits with per-game outcomes in ``evaluation``, in name order."""
    return sorted(key.removeprefix("eval/").removesuffix("/won") for key in evaluation
                  if key.startswith("eval/") and key.endswith("/won") and key.count("/") == 2)


def game_shares(evaluation: Mapping, splits: Sequence[str]) -> list[float]:
    """Each game's share of episodes won, for ``splits`` in the order given, games in each
    split's task order.

    Raises:
        KeyError: a split has no ``eval/{split}/won`` in ``evaluation``.
    """
    shares = []
    for split in splits:
        episodes = evaluation.get(f"eval/{split}/episodes_per_game",
                                  evaluation.get("eval/episodes_per_game", 1))
        shares += [int(wins) / episodes for wins in evaluation[f"eval/{split}/won"]]
    return shares


def bootstrap_mean_interval(table: Sequence[Sequence[float]], *, resamples: int = 10_000,
                            level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``table`` (``[S, G]``: seeds × games).

    Each resample draws ``S`` rows (seeds) and, independently, ``G`` columns (games)
    with replacement and takes the mean of the ``S × G`` cells they cross, so the
    interval carries both the seed-to-seed and the game-to-game variation; a column is
    the same game in every row (every seed evaluates the same tasks). The interval is
    the ``(1 − level)/2`` and ``(1 + level)/2`` quantiles of the ``resamples`` means
    (numpy's linear interpolation). Pure and deterministic for a ``seed``: a table of
    equal cells gives a zero-width interval at that value.
    """
    cells = np.asarray(table, dtype=np.float64)
    if cells.ndim != 2 or 0 in cells.shape:
        raise ValueError(f"bootstrap needs a non-empty [seeds, games] table, got shape "
                         f"{cells.shape}")
    rng = np.random.default_rng(seed)
    num_seeds, num_games = cells.shape
    # how often each seed / game is drawn in each resample: [B, S] and [B, G]
    seed_counts = _draw_counts(rng, resamples, num_seeds)
    game_counts = _draw_counts(rng, resamples, num_games)
    means = np.einsum("bs,sg,bg->b", seed_counts, cells, game_counts) / (num_seeds * num_games)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _draw_counts(rng: np.random.Generator, resamples: int, size: int) -> np.ndarray:
    """``[resamples, size]``: how often each of ``size`` items is drawn in ``size`` draws with
    replacement, for each resample."""
    draws = rng.integers(0, size, size=(resamples, size))
    offsets = np.arange(resamples)[:, None] * size
    return np.bincount((draws + offsets).ravel(), minlength=resamples * size).reshape(
        resamples, size).astype(np.float64)


def success_report(evaluations: Sequence[Mapping], sft: bool) -> list[str]:
    """What a finished run did, in words a newcomer reads right: for the RL pool (the
    training games RL trains on) and for the held-out games (new games, every other
    evaluated split together), the success before RL and after the last update, each with
    its 95 % bootstrap interval over games, and the change with its interval over the
    per-game changes. ``evaluations`` are the run's ``eval`` lines in order; the start is
    the one of update 0 (absent when ``run.eval_at_start`` was false)."""
    if not evaluations:
        return ["no evaluation was logged (run.updates=0 and run.eval_at_start=false?)"]
    start = next((e for e in evaluations if e.get("update") == 0), None)
    last = evaluations[-1]
    splits = evaluated_splits(last)
    others = [s for s in splits if s != POOL]
    groups = []
    if POOL in splits:
        groups.append(([POOL], "pool: the {games} training game{s} RL trains on"))
    if others:
        label = ("held-out: {games} new game{s} RL never trains on" if "train" not in others
                 else "evaluated")
        groups.append((others, label + f" ({', '.join(others)})"))
    before = "before RL (after SFT)" if sft else "before RL"
    after = f"after {last['update']} updates"
    width = max(len(before), len(after)) + 1
    lines = []
    for group, label in groups:
        final = game_shares(last, group)
        episodes = {int(last.get(f"eval/{s}/episodes_per_game", 1)) for s in group}
        each = "/".join(map(str, sorted(episodes)))
        lines.append(label.format(games=len(final), s="s" if len(final) != 1 else "")
                     + f", {each} episode{'s' if episodes != {1} else ''} each:")
        rows = [(after, final)]
        if start is not None and all(f"eval/{s}/won" in start for s in group):
            first = game_shares(start, group)
            rows.insert(0, (before, first))
        for name, shares in rows:
            low, high = bootstrap_mean_interval([shares])
            lines.append(f"  {name + ':':<{width}} {_pct(np.mean(shares))}  (95% interval over "
                         f"games: {_pct(low)} to {_pct(high)})")
        if len(rows) == 2:
            change = [b - a for a, b in zip(first, final, strict=True)]
            low, high = bootstrap_mean_interval([change])
            lines.append(f"  {'change:':<{width}} {100 * np.mean(change):+.1f} points  (95% "
                         f"interval over games: {100 * low:+.1f} to {100 * high:+.1f})")
    return lines


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"
