"""The input of every credit estimator: a flattened, ragged batch of rollouts
(docs/backbones.md §0).

A batch holds ``B`` rollouts and ``S`` steps in total. Rollouts have different
lengths, so per-step data is stored flat: step ``s`` belongs to rollout
``step_rollout[s]`` and is its ``step_index[s]``-th step. Steps of one rollout are
contiguous and in time order, and rollouts appear in order ``0..B-1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from agentcredit.credit.hindsight import HindsightScores, check_hindsight_scores
from agentcredit.credit.tensor_checks import check_finite
from agentcredit.credit.tokens import TokenScores, check_token_scores
from agentcredit.verifier.trace import RolloutTrace


@dataclass(frozen=True, eq=False)
class CreditBatch:
    """Per-rollout and per-step data a credit function reads (docs/backbones.md §0, §2, §3).

    Attributes:
        group_ids: ``[B]`` int64, the task group of each rollout (the rollouts of
            one task form one GRPO/RLOO/GiGPO group). Any integers; only equality matters.
        step_rollout: ``[S]`` int64, the rollout ``0..B-1`` each step belongs to;
            non-decreasing, every rollout has at least one step.
        step_index: ``[S]`` int64, the time index ``t`` of each step inside its
            rollout: ``0, 1, …, T_i − 1`` for rollout ``i``.
        step_rewards: ``[S]`` float, per-step rewards ``r_{i,t}``: the
            invalid-action penalty at the step that produced it, plus the outcome
            reward at the rollout's last step (docs/backbones.md §2).
        anchor_keys: ``S`` strings, the GiGPO anchor state of each step (the
            observation text the policy saw before acting).
        traces: VICT only (docs/vict.md §4): one ``RolloutTrace`` per rollout, in rollout
            order, each with as many steps as its rollout; ``None`` otherwise. Traces
            are plain data (no live verifier), so a batch pickles to another process
            in proportion to its steps, whatever the environment's size.
        tokens: token-level methods only (ADRS, docs/adrs.md §5): per-token scores of the
            valid response tokens (``credit.tokens.TokenScores``); ``None`` otherwise.
        action_keys: ``S`` strings, the action each step sent to the environment (the
            parsed action, else the raw response); SALT's transition nodes read them.
            ``None`` when not recorded.
        hindsight: HCAPO only: per-step mean response log-probs with and without the
            rollout's final observation in the prompt (``credit.hindsight.HindsightScores``);
            ``None`` otherwise.

    Shapes and ordering are validated once, at construction.
    """

    group_ids: Tensor
    step_rollout: Tensor
    step_index: Tensor
    step_rewards: Tensor
    anchor_keys: tuple[str, ...]
    traces: tuple[RolloutTrace, ...] | None = None
    tokens: TokenScores | None = None
    action_keys: tuple[str, ...] | None = None
    hindsight: HindsightScores | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.anchor_keys, tuple):
            object.__setattr__(self, "anchor_keys", tuple(self.anchor_keys))
        if self.action_keys is not None and not isinstance(self.action_keys, tuple):
            object.__setattr__(self, "action_keys", tuple(self.action_keys))
        if self.traces is not None and not isinstance(self.traces, tuple):
            object.__setattr__(self, "traces", tuple(self.traces))
        _check_vector("group_ids", self.group_ids, integer=True,
                      fix="pass torch.tensor(group_ids, dtype=torch.long) with one id per rollout")
        num_rollouts = self.group_ids.shape[0]
        if num_rollouts == 0:
            raise ValueError("CreditBatch.group_ids is empty: a batch needs at least one rollout.")
        _check_vector("step_rollout", self.step_rollout, integer=True,
                      fix="pass torch.tensor(rollout_of_each_step, dtype=torch.long)")
        num_steps = self.step_rollout.shape[0]
        _check_vector("step_index", self.step_index, integer=True, length=num_steps,
                      fix="pass one int64 time index per step, same length as step_rollout")
        _check_vector("step_rewards", self.step_rewards, integer=False, length=num_steps,
                      fix="pass one float reward per step, same length as step_rollout")
        if len(self.anchor_keys) != num_steps:
            raise ValueError(
                f"CreditBatch.anchor_keys has {len(self.anchor_keys)} keys but the batch has "
                f"{num_steps} steps; pass one anchor key (observation text) per step."
            )
        bad_keys = [k for k in self.anchor_keys if not isinstance(k, str)]
        if bad_keys:
            raise TypeError(
                f"CreditBatch.anchor_keys must be strings; got {type(bad_keys[0]).__name__} "
                f"{bad_keys[0]!r}. Convert each observation to its text before batching."
            )
        devices = {t.device for t in (self.group_ids, self.step_rollout, self.step_index,
                                      self.step_rewards)}
        if len(devices) > 1:
            raise ValueError(
                f"CreditBatch tensors live on different devices {sorted(map(str, devices))}; "
                "move them to one device with .to(device)."
            )
        check_finite(self.step_rewards, "CreditBatch.step_rewards",
                     "check the environment's reward for that step")
        _check_rollout_layout(self.step_rollout, self.step_index, num_rollouts)
        if self.traces is not None:
            _check_traces(self.traces, self.episode_lengths.tolist())
        if self.tokens is not None:
            check_token_scores(self.tokens, num_steps, self.step_rewards.device)
        if self.action_keys is not None and (
                len(self.action_keys) != num_steps
                or not all(isinstance(k, str) for k in self.action_keys)):
            raise ValueError(
                f"CreditBatch.action_keys must be {num_steps} strings, one action text per step; "
                f"got {len(self.action_keys)} entries. Pass each step's action (or response) text."
            )
        if self.hindsight is not None:
            check_hindsight_scores(self.hindsight, num_steps, self.step_rewards.device)

    # DERIVED VIEWS

    @property
    def num_rollouts(self) -> int:
        """``B``, the number of rollouts."""
        return self.group_ids.shape[0]

    @property
    def num_steps(self) -> int:
        """``S``, the number of steps over all rollouts."""
        return self.step_rollout.shape[0]

    @property
    def episode_lengths(self) -> Tensor:
        """``[B]`` int64, ``T_i`` = number of steps of rollout ``i``."""
        return torch.bincount(self.step_rollout, minlength=self.num_rollouts)

    @property
    def group_index(self) -> Tensor:
        """``[B]`` int64, dense group ids ``0..G-1`` (``group_ids`` relabelled in sorted order)."""
        return torch.unique(self.group_ids, return_inverse=True)[1]

    @property
    def num_groups(self) -> int:
        """``G``, the number of distinct task groups."""
        return int(torch.unique(self.group_ids).numel())

    @property
    def returns(self) -> Tensor:
        """``[B]``, the episode return ``R_i = Σ_t r_{i,t}``.

        [choice] ``R_i`` is the sum of *all* step rewards, so it includes the
        invalid-action penalties as well as the outcome reward: the backbones
        then prefer, among rollouts with the same outcome, the one with fewer
        invalid actions.
        """
        returns = torch.zeros(self.num_rollouts, dtype=self.step_rewards.dtype,
                              device=self.step_rewards.device)
        return returns.index_add_(0, self.step_rollout, self.step_rewards)

    # CONSTRUCTION FROM PLAIN PYTHON

    @classmethod
    def from_lists(
        cls,
        step_rewards: Sequence[Sequence[float]],
        group_ids: Sequence[int],
        anchor_keys: Sequence[Sequence[str]] | None = None,
        *,
        traces: Sequence[RolloutTrace] | None = None,
        action_keys: Sequence[Sequence[str]] | None = None,
        teacher_logprobs: Sequence[Sequence[Sequence[float]]] | None = None,
        behaviour_logprobs: Sequence[Sequence[Sequence[float]]] | None = None,
        ref_logprobs: Sequence[Sequence[Sequence[float]]] | None = None,
        update: int | None = None,
        hindsight_means: Sequence[Sequence[float]] | None = None,
        behaviour_means: Sequence[Sequence[float]] | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> CreditBatch:
        """Build a batch from per-rollout lists.

        Args:
            step_rewards: ``step_rewards[i][t]`` = ``r_{i,t}``; one list per rollout.
            group_ids: the task group of each rollout.
            anchor_keys: ``anchor_keys[i][t]`` = the anchor state of step ``t`` of
                rollout ``i``. ``None`` gives every step its own key (no shared
                anchor states, so GiGPO's step level contributes nothing).
            traces: VICT's per-rollout traces (see the class docstring), or ``None``.
            action_keys: ``action_keys[i][t]`` = the action text of step ``t`` of rollout
                ``i`` (SALT's nodes), or ``None``.
            teacher_logprobs: ``teacher_logprobs[i][t][j]`` = ``ℓ^T`` of response token ``j``
                of step ``t`` of rollout ``i`` (ADRS and RLSD read it; ``batch.tokens``), or
                ``None``. Every step needs at least one token.
            behaviour_logprobs: ``ℓ^b`` in the same layout (the probe gap), or ``None``.
            ref_logprobs: ``ℓ_ref`` in the same layout (ADRS's L1 gate), or ``None``.
            update: the 1-based update the batch trains (ADRS's token-path window), or ``None``.
            hindsight_means: ``hindsight_means[i][t]`` = ``m^H``, the mean response log-prob
                of step ``t`` with the rollout's final observation in the prompt (HCAPO;
                ``batch.hindsight``), or ``None``.
            behaviour_means: ``m^b`` in the same layout, the mean without it; required with
                ``hindsight_means``.
            dtype: float dtype of the rewards and scores.
            device: where the tensors live.
        """
        anchor_keys = _checked_anchor_keys(step_rewards, group_ids, anchor_keys)
        step_rollout, step_index = _flat_layout([len(r) for r in step_rewards])
        flat_rewards = [float(r) for rewards in step_rewards for r in rewards]
        step_lengths = [len(r) for r in step_rewards]
        tokens = _tokens_from_lists(step_lengths, teacher_logprobs, behaviour_logprobs,
                                    ref_logprobs, update, dtype, device)
        hindsight = _hindsight_from_lists(step_lengths, hindsight_means, behaviour_means, dtype,
                                          device)
        return cls(
            group_ids=torch.as_tensor(list(group_ids), dtype=torch.long, device=device),
            step_rollout=step_rollout.to(device),
            step_index=step_index.to(device),
            step_rewards=torch.tensor(flat_rewards, dtype=dtype, device=device),
            anchor_keys=tuple(k for keys in anchor_keys for k in keys),
            traces=None if traces is None else tuple(traces),
            action_keys=None if action_keys is None else tuple(k for keys in action_keys
                                                                for k in keys),
            tokens=tokens,
            hindsight=hindsight,
        )


# FROM_LISTS STAGES

def _checked_anchor_keys(step_rewards: Sequence[Sequence[float]], group_ids: Sequence[int],
                         anchor_keys: Sequence[Sequence[str]] | None
                         ) -> Sequence[Sequence[str]]:
    """``anchor_keys[i][t]`` after checking one group id per rollout and one key per step;
    ``None`` gives every step its own key ``rollout{i}/step{t}``."""
    if len(group_ids) != len(step_rewards):
        raise ValueError(
            f"from_lists got {len(step_rewards)} reward lists but {len(group_ids)} group ids; "
            "pass one group id per rollout."
        )
    if anchor_keys is None:
        anchor_keys = [[f"rollout{i}/step{t}" for t in range(len(r))]
                       for i, r in enumerate(step_rewards)]
    if len(anchor_keys) != len(step_rewards):
        raise ValueError(
            f"from_lists got {len(step_rewards)} reward lists but {len(anchor_keys)} "
            "anchor-key lists; pass one list of keys per rollout."
        )
    for i, (rewards, keys) in enumerate(zip(step_rewards, anchor_keys, strict=True)):
        if len(rewards) != len(keys):
            raise ValueError(
                f"rollout {i} has {len(rewards)} rewards but {len(keys)} anchor keys; "
                "pass one key per step."
            )
    return anchor_keys


def _flat_layout(episode_lengths: list[int]) -> tuple[Tensor, Tensor]:
    """``(step_rollout [S], step_index [S])`` int64 on the CPU for rollouts of
    ``episode_lengths`` (``T_i``) steps, stored one after another."""
    lengths = torch.tensor(episode_lengths, dtype=torch.long)
    step_rollout = torch.repeat_interleave(torch.arange(len(episode_lengths)), lengths)
    starts = torch.cumsum(lengths, 0) - lengths  # [B] flat offset of each rollout's first step
    step_index = torch.arange(int(lengths.sum())) - torch.repeat_interleave(starts, lengths)
    return step_rollout, step_index


def _tokens_from_lists(step_lengths: list[int],
                       teacher_logprobs: Sequence[Sequence[Sequence[float]]] | None,
                       behaviour_logprobs: Sequence[Sequence[Sequence[float]]] | None,
                       ref_logprobs: Sequence[Sequence[Sequence[float]]] | None,
                       update: int | None, dtype: torch.dtype,
                       device: torch.device | str | None) -> TokenScores | None:
    """``batch.tokens`` from per-rollout, per-step token lists (``ℓ^T``, ``ℓ^b``, ``ℓ_ref``),
    flattened to ``[N]`` with ``token_step [N]``; ``None`` without ``teacher_logprobs``."""
    if teacher_logprobs is None:
        if behaviour_logprobs is not None or ref_logprobs is not None:
            raise ValueError("from_lists got token log-probs without teacher_logprobs; pass "
                             "teacher_logprobs too (the token scores start from ℓ^T).")
        return None
    per_step = _token_scores("teacher_logprobs", teacher_logprobs, step_lengths)
    token_step = torch.repeat_interleave(
        torch.arange(len(per_step)), torch.tensor([len(x) for x in per_step],
                                                  dtype=torch.long)).to(device)

    def flat_tokens(name: str, scores) -> Tensor | None:
        if scores is None:
            return None
        rows = _token_scores(name, scores, step_lengths)
        if [len(x) for x in rows] != [len(x) for x in per_step]:
            raise ValueError(f"from_lists: {name} must have as many tokens in every "
                             "step as teacher_logprobs.")
        return torch.tensor([v for x in rows for v in x], dtype=dtype, device=device)

    return TokenScores(token_step=token_step,
                       teacher_logprobs=flat_tokens("teacher_logprobs", teacher_logprobs),
                       behaviour_logprobs=flat_tokens("behaviour_logprobs", behaviour_logprobs),
                       ref_logprobs=flat_tokens("ref_logprobs", ref_logprobs),
                       update=update)


def _hindsight_from_lists(step_lengths: list[int],
                          hindsight_means: Sequence[Sequence[float]] | None,
                          behaviour_means: Sequence[Sequence[float]] | None,
                          dtype: torch.dtype, device: torch.device | str | None
                          ) -> HindsightScores | None:
    """``batch.hindsight`` (``m^H``, ``m^b``, each ``[S]``) from per-rollout step lists; both
    or neither must be given."""
    if (hindsight_means is None) != (behaviour_means is None):
        raise ValueError("from_lists needs hindsight_means and behaviour_means together "
                         "(HCAPO compares m^H with m^b); pass both or neither.")
    if hindsight_means is None:
        return None
    return HindsightScores(
        hindsight=torch.tensor(_step_scores("hindsight_means", hindsight_means, step_lengths),
                               dtype=dtype, device=device),
        behaviour=torch.tensor(_step_scores("behaviour_means", behaviour_means, step_lengths),
                               dtype=dtype, device=device))

def _step_scores(name: str, scores: Sequence[Sequence[float]], step_lengths: list[int]
                 ) -> list[float]:
    """``scores[i][t]`` flattened in step order, after checking one value per step."""
    lengths = [len(x) for x in scores]
    if lengths != step_lengths:
        raise ValueError(f"from_lists: {name} has {lengths} values per rollout but the rewards "
                         f"have {step_lengths} steps; pass one value per step.")
    return [float(v) for rollout in scores for v in rollout]


def _token_scores(name: str, scores: Sequence[Sequence[Sequence[float]]],
                  step_lengths: list[int]) -> list[list[float]]:
    """``scores[i][t][j]`` as one token list per flat step, after checking one list per step."""
    lengths = [len(x) for x in scores]
    if lengths != step_lengths:
        raise ValueError(f"from_lists: {name} has {lengths} token lists per rollout but the "
                         f"rewards have {step_lengths} steps; pass one list per step.")
    return [[float(v) for v in step] for rollout in scores for step in rollout]


def _check_vector(name: str, value: object, *, integer: bool, fix: str,
                  length: int | None = None) -> None:
    """Raise if ``value`` is not a 1-D tensor of the right kind (and length).

    Not ``tensor_checks.check_float_vector``: these messages differ from its (a ``TypeError``
    for a non-tensor, int64 vectors too, the length compared with ``step_rollout``)."""
    kind = "int64" if integer else "floating-point"
    if not isinstance(value, Tensor):
        raise TypeError(f"CreditBatch.{name} must be a 1-D {kind} tensor; got "
                        f"{type(value).__name__}. Fix: {fix}.")
    ok_dtype = value.dtype == torch.long if integer else value.is_floating_point()
    if value.dim() != 1 or not ok_dtype:
        raise ValueError(f"CreditBatch.{name} must be a 1-D {kind} tensor; got dtype "
                         f"{value.dtype} shape {tuple(value.shape)}. Fix: {fix}.")
    if length is not None and value.shape[0] != length:
        raise ValueError(f"CreditBatch.{name} has length {value.shape[0]} but step_rollout has "
                         f"{length} steps. Fix: {fix}.")


def _check_rollout_layout(step_rollout: Tensor, step_index: Tensor, num_rollouts: int) -> None:
    """Raise unless rollouts are contiguous, ordered, non-empty and time-indexed ``0..T_i-1``."""
    if step_rollout.numel() and (step_rollout.min() < 0 or step_rollout.max() >= num_rollouts):
        bad = int(step_rollout[(step_rollout < 0) | (step_rollout >= num_rollouts)][0])
        raise ValueError(
            f"CreditBatch.step_rollout contains rollout {bad}, outside 0..{num_rollouts - 1} "
            f"(group_ids has {num_rollouts} rollouts); add the rollout's group id or fix the index."
        )
    if (step_rollout[1:] < step_rollout[:-1]).any():
        bad = int(torch.nonzero(step_rollout[1:] < step_rollout[:-1])[0]) + 1
        raise ValueError(
            f"CreditBatch.step_rollout decreases at step {bad} "
            f"({int(step_rollout[bad - 1])} → {int(step_rollout[bad])}); store the steps of "
            "rollout 0 first, then rollout 1, …, each rollout's steps contiguous."
        )
    lengths = torch.bincount(step_rollout, minlength=num_rollouts)
    if (lengths == 0).any():
        bad = int(torch.nonzero(lengths == 0)[0])
        raise ValueError(
            f"CreditBatch rollout {bad} has no steps; drop it from group_ids or give it its steps."
        )
    starts = torch.cumsum(lengths, 0) - lengths  # [B] flat offset of each rollout's first step
    expected = torch.arange(step_rollout.numel(), device=step_rollout.device) - starts[step_rollout]
    if (step_index != expected).any():
        bad = int(torch.nonzero(step_index != expected)[0])
        raise ValueError(
            f"CreditBatch.step_index[{bad}] = {int(step_index[bad])} but that step is step "
            f"{int(expected[bad])} of rollout {int(step_rollout[bad])}; steps must be in time "
            "order with indices 0, 1, …, T_i − 1 inside each rollout."
        )


def _check_traces(traces: tuple, lengths: list[int]) -> None:
    """Raise unless there is one ``RolloutTrace`` per rollout with the rollout's step count."""
    if len(traces) != len(lengths):
        raise ValueError(
            f"CreditBatch.traces has {len(traces)} traces but the batch has {len(lengths)} "
            "rollouts; pass one RolloutTrace per rollout, in rollout order."
        )
    for i, (trace, length) in enumerate(zip(traces, lengths, strict=True)):
        if not isinstance(trace, RolloutTrace):
            raise TypeError(
                f"CreditBatch.traces[{i}] is a {type(trace).__name__}; build each trace with "
                "agentcredit.verifier.trace.trace_rollout."
            )
        if trace.num_steps != length:
            raise ValueError(
                f"CreditBatch.traces[{i}] has {trace.num_steps} steps but rollout {i} has "
                f"{length}; trace exactly the steps that were batched."
            )
