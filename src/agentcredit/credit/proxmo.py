"""ProxMO: proximity-based multi-turn optimisation (Fang et al. 2026, "Proximity-Based
Multi-Turn Optimization: Practical Credit Assignment for LLM Agent Training"; code
GithubX-F/ProxMO-RL, Apache-2.0).

Two changes to GiGPO. At the episode level, a success-rate-aware weight scales
the group-relative advantage: a rare success in a hard group (low success rate
``p``) is amplified, a failure in an easy group (high ``p``) attenuated. At the
step level, the baseline of a step is not the mean over the steps with the
identical anchor observation but a softmax-weighted mean over every step of
the group, weighted by the TF-IDF cosine similarity of their observations, so
no step is a singleton:

    p_g       = (1/N) Σ_{i∈g} 1[R_i > θ]                  success rate of group g
    f(R_i, p) = σ((1 − p)^α) − ½   if rollout i succeeded,   σ(−p^α) − ½   otherwise
    w_i       = 1 + β · f(R_i, p_g)
    A^E_i     = w_i · (R_i − μ_g) / (σ_g + ε)              (mean_norm: w_i · (R_i − μ_g))
    W_{s,s'}  = softmax_{s'∈g} (cos(v_s, v_{s'}) / τ),  v = TF-IDF of the anchor observation
    b_s       = Σ_{s'∈g} W_{s,s'} G_{s'},   G the discounted return-to-go
    A_{i,t}   = A^E_i + w_S · (G_{i,t} − b_{i,t})

Symbols → variables: ``p_g`` → ``success_rate [G]``; ``w_i`` → ``episode_weight [B]``
(``success_rate_weight``); ``A^E`` → ``episode_adv [B]``; ``v`` → ``tfidf_vectors``;
``W`` → ``proximity_weights`` (one group at a time, ``[n, n]``), ``b`` → ``baseline [S]``; ``τ`` →
``temperature``; ``G`` → ``return_to_go [S]``; ``w_S`` → ``step_weight``; ``θ`` →
``success_threshold``. When every pair of a group's observations has similarity 1,
``W`` is uniform and ``b`` is the group mean of ``G`` (tested).

[choice] The form of ``f`` and the values ``β = 0.866``, ``α = 5`` come from the released
code (its "polarized signal controller"); the paper text at hand gives only
``w = 1 + β·f(R, p)``. TF-IDF: lower-cased alphanumeric words, raw term counts, the
smoothed ``idf = ln((1 + n)/(1 + df)) + 1`` over the batch's ``n`` steps, rows
L2-normalised (an observation with no word has similarity 0 to every step).

Where the released code departs from the paper (we follow the paper):

- it takes the episode-level mean, std and success rate over step rows
  (``compute_mean_std_cross_steps=True``), so long rollouts count more; here one
  value per rollout, as the paper's (and GiGPO's) episode-level equation;
- its ``p`` is the clamped group mean reward, which is a success rate only for 0/1
  rewards; here ``p`` counts rollouts with ``R_i > θ`` (ALFWorld's reward is ``10·1[won]``
  with −0.1 penalties);
- its soft-grouping mode also drops the std at the episode level; here the episode
  level is the z-score the modulation is defined on (``mode=mean_norm`` gives theirs);
- it uses the unbiased std and caps TF-IDF at 1024 features (scikit-learn); here the
  population std (docs/backbones.md §3) and the whole vocabulary;
- its README quotes ``w ≈ 1.05 / 0.95`` at the extremes, while its code's defaults give
  ``w → 1.2 / 0.8``; we use the code's ``β``, ``α``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import Tensor

from agentcredit.config.schema import validate
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.gigpo import discounted_return_to_go
from agentcredit.credit.grpo import episode_group_diagnostics, group_relative
from agentcredit.credit.registry import register_estimator
from agentcredit.credit.result import CreditResult

_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class ProxMOConfig:
    """Options of ProxMO (Fang et al. 2026).

    Attributes:
        beta: ``β`` in [0, 100], strength of the success-rate-aware weight (released code:
            0.866).
        alpha: ``α`` in (0, 1000], steepness of ``f`` in the success rate (released code: 5).
        temperature: ``τ`` in (0, 1000] of the proximity softmax (paper: 0.1).
        gamma: ``γ`` ∈ [0, 1] of the step-level return-to-go (0.95, GiGPO's).
        step_weight: ``w_S`` in [0, 100], weight of the step-level advantage (1.0).
        mode: ``mean_std_norm`` (the paper's z-score episode level) or ``mean_norm``
            (``R_i − μ_g``, the released code's soft-grouping mode).
        success_threshold: ``θ``; rollout ``i`` succeeded when ``R_i > θ`` (0, [choice]);
            ±1e6, past any return.
        eps: ``ε`` in [0, 1] added to the episode-level std (1e-6).
    """

    config_name: ClassVar[str] = "proxmo"
    _limits: ClassVar[dict[str, tuple]] = {
        "beta": (0.0, 100.0), "alpha": (0.0, 1000.0, "open"),
        "temperature": (0.0, 1000.0, "open"), "gamma": (0.0, 1.0), "step_weight": (0.0, 100.0),
        "success_threshold": (-1e6, 1e6), "eps": (0.0, 1.0)}

    beta: float = 0.866
    alpha: float = 5.0
    temperature: float = 0.1
    gamma: float = 0.95
    step_weight: float = 1.0
    mode: Literal["mean_std_norm", "mean_norm"] = "mean_std_norm"
    success_threshold: float = 0.0
    eps: float = 1e-6

    def __post_init__(self) -> None:
        validate(self)


def success_rate_weight(success: Tensor, group: Tensor, num_groups: int, *, alpha: float,
                        beta: float) -> Tensor:
    """``w_i = 1 + β f(R_i, p_g)`` for ``success [B]`` bool and dense ``group [B]``; ``[B]``."""
    hits = torch.zeros(num_groups, dtype=torch.float64, device=success.device)
    hits.index_add_(0, group, success.to(torch.float64))
    rate = (hits / torch.bincount(group, minlength=num_groups).clamp(min=1))[group]  # [B] p_g
    f = torch.where(success, torch.sigmoid((1.0 - rate) ** alpha),
                    torch.sigmoid(-(rate ** alpha))) - 0.5
    return 1.0 + beta * f


def tfidf_vectors(texts: Sequence[str]) -> tuple[list[dict[int, float]], int]:
    """L2-normalised TF-IDF rows of ``texts`` as sparse ``{word id: weight}`` maps, and the
    vocabulary size (smoothed idf over ``texts``; see the module docstring)."""
    counts = [Counter(_WORD.findall(text.lower())) for text in texts]
    vocab: dict[str, int] = {}
    df: Counter[str] = Counter()
    for row in counts:
        df.update(row.keys())
        for word in row:
            vocab.setdefault(word, len(vocab))
    n = len(texts)
    idf = {word: math.log((1 + n) / (1 + df[word])) + 1.0 for word in vocab}
    rows = []
    for row in counts:
        weights = {vocab[w]: c * idf[w] for w, c in row.items()}
        norm = math.sqrt(sum(v * v for v in weights.values())) or 1.0
        rows.append({k: v / norm for k, v in weights.items()})
    return rows, len(vocab)


def cosine_similarity(rows: Sequence[dict[int, float]], vocab_size: int) -> Tensor:
    """``[n, n]`` cosine similarities of L2-normalised sparse rows (``tfidf_vectors``)."""
    dense = torch.zeros(len(rows), max(vocab_size, 1), dtype=torch.float64)
    for i, row in enumerate(rows):
        if row:
            dense[i, list(row)] = torch.tensor(list(row.values()), dtype=torch.float64)
    return dense @ dense.T


def proximity_weights(similarity: Tensor, temperature: float) -> Tensor:
    """``W = softmax(similarity / τ)`` over each row, for one group: ``[n, n]`` → ``[n, n]``;
    row ``s`` weighs every step of the group (itself included) for ``b_s = Σ W_{s,s'} G_{s'}``."""
    return torch.softmax(similarity.to(torch.float64) / temperature, dim=1)


@register_estimator("proxmo", ProxMOConfig, claims=("step_credit", "permutation"))
def proxmo(batch: CreditBatch, config: ProxMOConfig) -> CreditResult:
    """ProxMO step advantages ``A_{i,t} = A^E_i + w_S (G_{i,t} − b_{i,t})`` (see the module
    docstring for the equations).

    Returns ``step_advantages [S]``; ``extras``: ``episode_advantage [B]`` (``A^E``, VICT's
    direction), ``return_to_go [S]``, ``proximity_baseline [S]`` (``b``); diagnostics: the episode
    ones plus the mean weight ``w``, the step term's scale and the mean effective
    neighbourhood ``1 / Σ_{s'} W_{s,s'}²`` of a step.
    """
    group, num_groups = batch.group_index, batch.num_groups  # [B]
    success = batch.returns > config.success_threshold  # [B]
    # EPISODE LEVEL
    weight = success_rate_weight(success, group, num_groups, alpha=config.alpha,
                                 beta=config.beta)  # [B]
    episode_adv = weight * group_relative(batch.returns, group, num_groups,
                                          norm_by_std=config.mode == "mean_std_norm",
                                          eps=config.eps).to(torch.float64)  # [B]
    # STEP LEVEL: one group at a time (the data is ragged; similarity is within a group)
    return_to_go = discounted_return_to_go(batch, config.gamma).to(torch.float64)  # [S]
    rows, vocab_size = tfidf_vectors(batch.anchor_keys)
    step_group = group[batch.step_rollout]  # [S]
    baseline = torch.zeros_like(return_to_go)
    neighbourhood = torch.zeros_like(return_to_go)
    for g in range(num_groups):
        members = torch.nonzero(step_group == g).flatten()  # [n]
        similarity = cosine_similarity([rows[s] for s in members.tolist()], vocab_size)
        weights = proximity_weights(similarity, config.temperature)  # [n, n] W
        baseline[members] = weights @ return_to_go[members]  # b
        neighbourhood[members] = 1.0 / weights.square().sum(1)
    step_adv = return_to_go - baseline  # [S]
    advantages = episode_adv[batch.step_rollout] + config.step_weight * step_adv
    dtype = batch.step_rewards.dtype
    diagnostics = episode_group_diagnostics(batch, episode_adv)
    diagnostics.update({
        "mean_episode_weight": weight.mean().item(),
        "mean_abs_step_advantage": step_adv.abs().mean().item(),
        "mean_neighbourhood": neighbourhood.mean().item(),
    })
    return CreditResult(step_advantages=advantages.to(dtype), diagnostics=diagnostics,
                        extras={"episode_advantage": episode_adv.to(dtype),
                                "return_to_go": return_to_go.to(dtype),
                                "proximity_baseline": baseline.to(dtype)})
