"""A batch's steps in the embedded trainer's two forms: padded training rows and the credit batch.

Training samples (design decision): a step's sample is the prompt it was sampled from
followed by its response; ``tensorize_steps`` pads them into ``[S, L]`` tensors whose
``loss_mask`` covers response tokens only, so every policy token is trained once and
prompt, padding and environment text never. ``credit_batch`` reads the same steps, in the
same flat order, into the ``CreditBatch`` an estimator takes; the estimator's
``CreditResult`` goes back to those rows with ``CreditResult.per_token(loss_mask)``.

verl builds neither: its rows come from its own batch (``integrations/verl/rows.py``,
``credit_batch_from_rows``). What the two paths share lies in ``credit/``: the estimator
registry (``credit.get_estimator``), DAPO's overlong penalty (``credit/overlong.py``) and
the write-back ``CreditResult.per_token``.

The rows are the ``Rows`` every scoring forward takes (``train/scoring/tree_forward.py``),
``loss_mask`` their scored tokens, with what a step adds: its sampling log-probs and its
rollout. So the behaviour, reference, teacher and hindsight passes, the PPO update and SFT all
read one record.

Flat order: rollout 0's steps first, in time order, then rollout 1's, …
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from agentcredit.credit.batch import CreditBatch
from agentcredit.rollout.admissible import allowed_tensor
from agentcredit.rollout.records import Trajectory
from agentcredit.train.scoring.tree_forward import Rows


@dataclass(frozen=True, eq=False, kw_only=True)
class StepTensors(Rows):
    """The steps of a batch of trajectories as padded training samples, ``S`` rows: the
    ``Rows`` every scoring forward takes, plus what each step adds.

    Row ``s`` is ``prompt_ids + response_ids`` of flat step ``s`` (the order of
    ``CreditBatch``), right-padded to ``L``.

    Attributes (the first four are ``Rows``', given by position or name; the rest by name):
        input_ids: ``[S, L]`` int64.
        attention_mask: ``[S, L]`` int64, 1 on real tokens.
        loss_mask: ``[S, L]`` bool, True exactly on response tokens.
        allowed: ``[S, L, K]`` int64, each response token's allowed ids (−1
            padded, ``rollout.admissible.allowed_tensor``) when any step was
            sampled with admissible decoding, else ``None``. Every scoring pass
            takes it, so it renormalises as the sampler did.
        sampling_logprobs: ``[S, L]`` float32, the sampling log-prob of each
            response token at its position, 0 elsewhere.
        step_rollout: ``[S]`` int64, the trajectory each row belongs to.
    """

    sampling_logprobs: Tensor
    step_rollout: Tensor

    @property
    def num_response_tokens(self) -> int:
        """Number of trained (response) tokens ``|V|``."""
        return int(self.loss_mask.sum())

    def select(self, rows: Tensor) -> StepTensors:
        """These steps' rows ``rows`` (a ``[S]`` bool mask or indices), in flat order."""
        return StepTensors(**{field.name: None if (value := getattr(self, field.name)) is None
                              else value[rows.to(value.device)] for field in fields(self)})


def tensorize_steps(trajectories: Sequence[Trajectory], pad_id: int) -> StepTensors:
    """Pad every step's ``prompt + response`` into ``[S, L]`` tensors (see ``StepTensors``)."""
    steps = [(i, step) for i, traj in enumerate(trajectories) for step in traj.steps]
    if not steps:
        raise ValueError("tensorize_steps got no steps; every trajectory needs at least one")
    length = max(len(s.prompt_ids) + len(s.response_ids) for _, s in steps)
    num = len(steps)
    input_ids = torch.full((num, length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((num, length), dtype=torch.long)
    loss_mask = torch.zeros((num, length), dtype=torch.bool)
    logprobs = torch.zeros((num, length), dtype=torch.float32)
    for row, (_, step) in enumerate(steps):
        p, n = len(step.prompt_ids), len(step.response_ids)
        input_ids[row, :p + n] = torch.tensor(step.prompt_ids + step.response_ids)
        attention_mask[row, :p + n] = 1
        loss_mask[row, p:p + n] = True
        logprobs[row, p:p + n] = torch.tensor(step.sampling_logprobs, dtype=torch.float32)
    allowed = None
    if any(s.allowed_ids is not None for _, s in steps):
        allowed = allowed_tensor([s.allowed_ids for _, s in steps],
                                 [len(s.prompt_ids) for _, s in steps], length)
    return StepTensors(input_ids, attention_mask, loss_mask, allowed, sampling_logprobs=logprobs,
                       step_rollout=torch.tensor([i for i, _ in steps], dtype=torch.long))


def credit_batch(trajectories: Sequence[Trajectory], traces=None) -> CreditBatch:
    """The ``CreditBatch`` of the trajectories: group ids, per-step rewards, anchor keys, the
    action each step sent (the parsed action, else the raw response, as the environment got it)
    and, for VICT, one ``RolloutTrace`` per trajectory (``train.scoring.verifier_traces``)."""
    return CreditBatch.from_lists(
        step_rewards=[[s.reward for s in t.steps] for t in trajectories],
        group_ids=[t.group_id for t in trajectories],
        anchor_keys=[[s.anchor_key for s in t.steps] for t in trajectories],
        traces=traces,
        action_keys=[[s.response if s.action is None else s.action for s in t.steps]
                     for t in trajectories],
    )
