"""The PPO update (docs/backbones.md §1), over step rows laid out as prefix trees (§0.1).

``ppo_update`` runs one epoch of clipped-ratio PPO over a ``PPOBatch`` (the step rows and the
behaviour log-probs ``ℓ^b`` the scoring passes gave, ``train/scoring/``), with an optional
auxiliary loss from ``credit.aux_losses``. For each mini-batch, ``tree_training.train_trees``
runs the mini-batch's trees, each branch batch's loss being ``ppo_loss`` (``_loss``); then the
clipped gradient's ``optimizer.step()``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from agentcredit.config import OptimConfig
from agentcredit.credit.aux_losses import get_aux_loss
from agentcredit.train.loss import ppo_loss
from agentcredit.train.prefix_tree import layout_trees, uses_trees
from agentcredit.train.step_tensors import StepTensors
from agentcredit.train.tree_training import train_trees


@dataclass
class PPOBatch:
    """What one PPO update trains on: the step rows and what each token carries, row-aligned.

    Attributes:
        steps: the ``S`` step samples (``step_tensors.tensorize_steps``).
        old_logprobs: ``[S, L]`` ``ℓ^b``, the behaviour log-probs the ratio is taken to.
        advantages: ``[S, L]`` float32, each response token's advantage
            (``CreditResult.per_token``), 0 elsewhere.
        ref_logprobs: ``[S, L]`` ``ℓ_ref`` of the frozen reference for the KL term, or ``None``.
        teacher_logprobs: ``[S, L]`` ``ℓ^T`` an auxiliary loss pulls toward, or ``None``.
    """

    steps: StepTensors
    old_logprobs: Tensor
    advantages: Tensor
    ref_logprobs: Tensor | None = None
    teacher_logprobs: Tensor | None = None


def ppo_update(model, optimizer, batch: PPOBatch, config: OptimConfig,
               generator: torch.Generator, temperature: float = 1.0) -> dict[str, float]:
    """One epoch of PPO over the step samples of ``batch`` (docs/backbones.md §1).

    Under ``config.layout = "trees"`` (docs/backbones.md §0.1) the rollouts are shuffled with
    ``generator`` and split into ``config.mini_batches`` optimiser steps, and each
    mini-batch's rows run as prefix trees (``config.micro_batch_size`` branches per forward);
    under ``rows`` (or on a model ``train.prefix_tree.uses_trees`` refuses) the rows are
    shuffled and split, and run in micro-batches of ``config.micro_batch_size`` sorted by
    length. Every forward's loss uses the mini-batch's valid-token count as ``|V|``, so
    gradient accumulation gives exactly the mini-batch's token-mean loss.

    With ``config.aux_loss`` (``opsd`` / ``sdar`` / ``skill_sd``, docs/adrs.md §5.6) each
    micro-batch adds ``β ·`` the auxiliary loss toward ``batch.teacher_logprobs`` (``ℓ^T``) to
    its PPO loss; ``config.pg_coef`` weights the policy-gradient term (0 = distillation alone)
    and ``config.entropy_coef`` subtracts that multiple of the token-mean entropy. New
    log-probs and entropies are those of ``softmax(z / temperature)``, the policy that sampled
    the batch, renormalised over ``steps.allowed`` when it is set. The entropies are in the
    autograd graph only when ``config.entropy_coef`` is not 0; otherwise they are computed
    without one, for ``ppo/entropy`` alone. With ``config.gradient_checkpointing`` the
    decoder layers are recomputed in the backward (the same update, less memory).

    With ``config.loss_agg = "rollout_mean"`` each row's advantages are first scaled by
    ``rollout_weights``, so every rollout weighs alike in the policy-gradient term. Only that
    term: the KL and auxiliary terms pull every token toward the reference or the teacher, and
    the entropy bonus keeps every token's distribution wide, whatever its rollout's length,
    so they stay token means (docs/backbones.md §1).

    Rows without a gradient (``_rows_with_gradient``: zero advantage everywhere, and nothing
    but the policy gradient in the loss) are not run; the loss keeps the mini-batch's whole
    ``|V|``, so the update is the one that running them would give (to float rounding).

    Returns ``ppo/pg_loss``, ``ppo/kl`` (k3 to the reference), ``ppo/clip_frac``,
    ``ppo/approx_kl``, ``ppo/ratio_mean``, ``ppo/entropy`` (token means over the rows trained
    on), ``ppo/trained_rows`` (their share of the batch) and the pre-clip ``ppo/grad_norm``,
    each averaged over the mini-batches; with an auxiliary
    loss also ``ppo/aux_loss`` and its statistics (``ppo/opsd_gap``, ``ppo/sdar_gate_mean``, …).
    """
    aux = get_aux_loss(config.aux_loss) if config.aux_loss != "none" else None
    if aux is not None and batch.teacher_logprobs is None:
        raise ValueError(f"optim.aux_loss = {config.aux_loss!r} needs the teacher log-probs ℓ^T")
    steps = batch.steps
    device = next(model.parameters()).device
    per_token = _per_token_inputs(batch, config, aux is not None)
    trained = _rows_with_gradient(steps, batch.advantages, config, aux is not None)  # [S]
    totals: dict[str, list[float]] = {}
    for rows in _mini_batches(steps, config.mini_batches, generator,
                              by_rollout=uses_trees(model, config.layout)):
        normalizer = steps.loss_mask[rows].sum().clamp(min=1).to(torch.float32).to(device)
        rows = rows[trained[rows]]
        parts = train_trees(
            model, layout_trees(model, steps, config.layout, rows), steps,
            branch_batch=config.micro_batch_size,
            branch_loss=lambda logprobs, entropy, members, normalizer=normalizer: _loss(
                logprobs, entropy, _cut(per_token, members, logprobs.shape[1], device),
                normalizer, config, aux),
            with_entropy=True, entropy_grad=config.entropy_coef != 0, temperature=temperature,
            checkpointing=config.gradient_checkpointing)
        if not len(rows):
            _zero_gradients(model)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        statistics = _trained_token_means(parts, normalizer, steps.loss_mask[rows])
        for key, value in {**statistics, "grad_norm": float(grad_norm)}.items():
            totals.setdefault(key, []).append(value)
    # an all-silent mini-batch has a grad norm only: each figure is averaged where it exists
    return {"ppo/trained_rows": float(trained.double().mean()),
            **{f"ppo/{key}": sum(values) / len(values) for key, values in totals.items()}}


def _loss(logprobs: Tensor, entropy: Tensor, t: dict[str, Tensor], normalizer: Tensor,
          config: OptimConfig, aux) -> tuple[Tensor, dict[str, float]]:
    """One branch batch's loss from its new log-probs and entropies ``[b, w]`` and its
    per-token inputs ``t`` (``_cut``): ``ppo_loss``, plus the auxiliary loss toward ``ℓ^T``
    when ``aux`` is set; and its statistics, the token-mean entropy among them."""
    loss, stats = ppo_loss(logprobs, t["old"], t.get("ref"), t["adv"], t["mask"],
                           config.clip_low, config.clip_high, config.kl_coef,
                           normalizer=normalizer, pg_coef=config.pg_coef,
                           entropy=entropy, entropy_coef=config.entropy_coef)
    if aux is not None:
        aux_term, aux_stats = aux.fn(logprobs, t["teacher"], t["old"], t["mask"],
                                     config.aux_coef, normalizer)
        loss = loss + aux_term
        stats.update(aux_stats, aux_loss=float(aux_term.detach()))
    stats["entropy"] = float((entropy.detach() * t["mask"]).sum() / normalizer)
    return loss, stats


def _per_token_inputs(batch: PPOBatch, config: OptimConfig, auxiliary: bool
                      ) -> dict[str, Tensor]:
    """``[S, L]`` what the loss reads at each token: ``mask``, ``old`` (``ℓ^b``), ``adv``
    (scaled by ``rollout_weights`` under ``loss_agg=rollout_mean``), and ``ref`` / ``teacher``
    where the loss has such a term."""
    steps, advantages = batch.steps, batch.advantages
    if config.loss_agg == "rollout_mean":
        advantages = advantages * rollout_weights(steps.loss_mask, steps.step_rollout)[:, None]
    inputs = {"mask": steps.loss_mask, "old": batch.old_logprobs, "adv": advantages,
              "ref": batch.ref_logprobs, "teacher": batch.teacher_logprobs if auxiliary else None}
    return {name: value for name, value in inputs.items() if value is not None}


def _cut(per_token: dict[str, Tensor], rows: Tensor, width: int, device: torch.device
         ) -> dict[str, Tensor]:
    """Rows ``rows``, columns ``0 … width − 1`` of each of ``per_token``, on ``device``."""
    return {name: value[rows, :width].to(device) for name, value in per_token.items()}


def _zero_gradients(model) -> None:
    """An all-silent mini-batch: AdamW steps on the zero gradient that running it gives
    (its moments decay, its weight decay applies), as a mini-batch of rows would."""
    for param in model.parameters():
        if param.requires_grad:
            param.grad = torch.zeros_like(param)


def _trained_token_means(parts: list[dict[str, float]], normalizer: Tensor,
                         trained_mask: Tensor) -> dict[str, float]:
    """The mini-batch's statistics as token means over the rows trained on.

    Each branch batch's figures are sums over its tokens divided by the whole mini-batch's
    ``|V|`` (``normalizer``); rescaled by ``|V| / |V_trained|`` they add up to token means
    over the rows trained on. Rows without a gradient have no loss and nothing clipped (what
    they would read for the ratio and the entropy is not measured), so a mini-batch with no
    trained row reports 0 for the loss, the KL and the clip fraction only.
    """
    if not parts:
        return {"pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0}
    to_trained = float(normalizer.cpu() / trained_mask.sum().clamp(min=1))
    sums: dict[str, float] = {}
    for stats in parts:
        for key, value in stats.items():
            sums[key] = sums.get(key, 0.0) + value * to_trained
    return sums


def _mini_batches(steps: StepTensors, count: int, generator: torch.Generator,
                  by_rollout: bool) -> list[Tensor]:
    """The rows of each of ``count`` mini-batches: the rows shuffled with ``generator`` and
    split evenly, or with ``by_rollout`` the rollouts shuffled and split evenly, each
    mini-batch holding its rollouts' rows in flat order (so a prefix tree is never split)."""
    if not by_rollout:
        order = torch.randperm(steps.input_ids.shape[0], generator=generator)
        return [rows for rows in order.tensor_split(count) if len(rows)]
    rollouts = torch.unique(steps.step_rollout)
    order = rollouts[torch.randperm(len(rollouts), generator=generator)]
    return [torch.isin(steps.step_rollout, share).nonzero().flatten()
            for share in order.tensor_split(count) if len(share)]


def rollout_weights(loss_mask: torch.Tensor, step_rollout: torch.Tensor) -> torch.Tensor:
    """``[S]`` weight of each step row under ``optim.loss_agg=rollout_mean``.

    ``w_s = (|V| / R) / |V_r(s)|``: ``|V_r|`` is rollout ``r``'s response tokens, ``R`` the
    rollouts with any, ``|V|`` their sum. Scaling row ``s``'s advantages by ``w_s`` gives
    every rollout the same total weight in the token-mean loss, and leaves the sum of the
    weights over the tokens at ``|V|``, so the loss's scale is that of ``token_mean``.

    Args:
        loss_mask: ``[S, L]`` the response tokens of each step row.
        step_rollout: ``[S]`` int64, the rollout of each row.
    """
    tokens = loss_mask.sum(dim=1).to(torch.float64)  # [S]
    per_rollout = torch.zeros(int(step_rollout.max()) + 1, dtype=torch.float64)
    per_rollout.index_add_(0, step_rollout, tokens)  # [R]
    mean = per_rollout[per_rollout > 0].mean()
    return (mean / per_rollout[step_rollout].clamp(min=1)).to(torch.float32)


def _rows_with_gradient(steps: StepTensors, advantages: torch.Tensor, config: OptimConfig,
                        auxiliary: bool) -> torch.Tensor:
    """``[S]`` bool: the step samples whose loss has a gradient.

    With no KL term, no entropy bonus and no auxiliary loss, a row whose advantage is 0 on
    every valid token adds exactly nothing to the loss's gradient (``−0 · ω``); its forward and
    backward are skipped. That is every step of a group whose rollouts all got the same
    return (GRPO, RLOO), often most of a batch.
    """
    if config.kl_coef != 0 or config.entropy_coef != 0 or auxiliary:
        return torch.ones(steps.input_ids.shape[0], dtype=torch.bool)
    return ((advantages != 0) & steps.loss_mask.bool()).any(dim=1)
