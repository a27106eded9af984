"""HCAPO's equations (credit/hcapo.py's docstring) in plain Python, with no rule about which
rollouts' hindsight is read: the tests' independent oracle for ``credit.hcapo.hcapo``."""

from __future__ import annotations

from statistics import fmean, pstdev


def _z(values: list[float], eps: float) -> list[float]:
    """``(x − μ) / (σ + ε)`` with the population std; 0 when every value is equal."""
    if max(values) == min(values):
        return [0.0] * len(values)
    mu, sigma = fmean(values), pstdev(values)
    return [(v - mu) / (sigma + eps) for v in values]


def hcapo_by_the_formulas(rewards: list[list[float]], groups: list[int],
                          ratios: list[list[float]], *, gamma: float = 0.95, low: float = 0.8,
                          high: float = 1.2, weight: float = 1.0, threshold: float = 0.0,
                          eps: float = 1e-6) -> list[float]:
    """Flat step advantages ``A_{i,t}`` from ``rewards[i][t]``, ``groups[i]`` and the raw
    ratios ``ρ_{i,t}`` (``ratios[i][t]``), every rollout's ratios read."""
    returns = [sum(r) for r in rewards]
    value = []  # Q^H per rollout
    for r, rho in zip(rewards, ratios, strict=True):
        g = [sum(gamma ** (k - t) * r[k] for k in range(t, len(r))) for t in range(len(r))]
        mean = fmean(rho)
        value.append([min(max(x / mean, low), high) * gt for x, gt in zip(rho, g, strict=True)])
    macro, micro = [0.0] * len(rewards), [[] for _ in rewards]
    for group in dict.fromkeys(groups):
        members = [i for i, g in enumerate(groups) if g == group]
        for i, z in zip(members, _z([returns[i] for i in members], eps), strict=True):
            macro[i] = z
        zs = iter(_z([q for i in members for q in value[i]], eps))
        for i in members:
            micro[i] = [next(zs) for _ in value[i]]
    out = []
    for i, steps in enumerate(micro):
        for z in steps:
            a = macro[i] + weight * z
            out.append(max(a, 0.0) if returns[i] > threshold else a)
    return out
