"""Privileged rescoring for ADRS (docs/adrs.md §5.1): the teacher log-probs ``ℓ^T`` of the sampled
tokens.

``ℓ^T_{s,j} = log π_θb(y_{s,j} | ρ(x) ⊕ h_s, y_{s,<j})``: the frozen behaviour
snapshot (the very model that sampled the batch, before the update) scores
each step's response again with the task's skill inserted into its prompt
(``skills.SkillSplicer``). Nothing is sampled and no weight changes: the pass
runs under ``no_grad`` in eval mode (the caller's mode is restored).
``teacher_logprobs`` runs it over a batch's steps, each with its task's skill;
``privileged_logprobs`` takes any privileged text per row (HCAPO's hindsight pass
inserts the final observation the same way, ``hindsight_pass.py``). Who reads the
skill text, per method: docs/adrs.md §5.6.

**One trunk per privileged head** (docs/backbones.md §0.1). Step ``s``'s privileged prompt
is ``head + rest_s``, where ``head`` = system turn + user header + inserted text is the same for
every row that inserts the same text: every rollout and step of a task for a skill (often
~500 tokens of a ~1000-token row), every step of one rollout for HCAPO's hindsight. Under
``optim.layout=trees`` each head but its last token is a trunk computed once
(``tree_forward.trunk_forward``), and the rows that share it continue it as prefix trees of
their trajectory (``train.prefix_tree.prefix_trees`` over ``head[-1] + rest + response``, the
head's last token re-fed so that every scored logit comes from the row's own branch): the
head once per task, each history line a trajectory's steps share once per trajectory. Under
``rows`` (or on a model ``uses_trees`` refuses) every row runs its whole privileged sequence
alone. Both give the same log-probs up to float rounding (tested to 1e-5 in float32; under
bfloat16 compute to its precision), through the one
tree forward every pass runs, with the LM head only on the columns that predict response
tokens.

Output layout: ``[S, L]`` aligned with the input rows, like every scoring pass
(``tree_forward.score_trees``): entry ``(s, l)`` is ``ℓ^T`` of token ``l`` of row
``s`` on ``loss_mask`` positions and 0 elsewhere, so
``TokenScores.from_step_rows(loss_mask, teacher, ...)`` takes it as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from agentcredit.rollout.records import Trajectory
from agentcredit.skills.prefix import SkillSplicer
from agentcredit.skills.provider import SkillProvider
from agentcredit.train.prefix_tree import prefix_trees, row_trees, uses_trees
from agentcredit.train.scoring.tree_forward import Rows, score_trees, trunk_forward
from agentcredit.train.step_tensors import StepTensors


@dataclass
class _Row:
    """One step sample rewritten for the teacher: ``shared + tail``, last ``scored`` tokens
    scored."""

    index: int  # row of the input
    shared: tuple[int, ...]  # prompt head + inserted text, identical for every row of a task
    tail: list[int]  # rest of the prompt, then the response (up to the last real token)
    scored: int  # trailing tokens of ``tail`` whose log-prob is returned
    start: int  # column of the input row where the scored tokens start
    allowed: Tensor | None  # [scored, K] allowed ids of the scored tokens (admissible decoding)


def privileged_logprobs(
    model: nn.Module,
    splicer: SkillSplicer,
    input_ids: Tensor,
    attention_mask: Tensor,
    loss_mask: Tensor,
    texts: Sequence[str],
    *,
    micro_batch_size: int,
    allowed: Tensor | None = None,
    temperature: float = 1.0,
    groups: Tensor | None = None,
) -> Tensor:
    """``ℓ^T`` of every response token, with each row's text inserted into its prompt.

    Args:
        model: the frozen behaviour snapshot (the policy before this update).
        splicer: a ``SkillSplicer`` for the model's tokenizer.
        input_ids: ``[S, L]`` step samples, prompt then response, right padded
            (``train.step_tensors.StepTensors``).
        attention_mask: ``[S, L]``, 1 on real tokens (a prefix of each row).
        loss_mask: ``[S, L]``, the response tokens; the prompt is everything
            before a row's first response token.
        texts: what ``splicer`` inserts into each row's prompt: the skill text ``ρ(x)`` of the
            row's task (``SkillProvider.skill_text``), or for a ``HindsightSplicer`` its
            rollout's final observation (``scoring/hindsight_pass.py``).
        micro_batch_size: rows per forward pass (the result does not depend on it).
        allowed: ``[S, L, K]`` allowed ids per token (admissible decoding, −1 padded,
            ``StepTensors.allowed``): the teacher renormalises over the same sets the
            sampler did. ``None``: the whole vocabulary.
        temperature: the policy's ``T``: ``ℓ^T`` is scored under ``softmax(z / T)``, as the
            student's ``ℓ^b`` is.
        groups: ``[S]`` the trajectory of each row: each privileged head is a trunk and the
            rows continue it as prefix trees of their trajectory (see the module docstring),
            on a model ``train.prefix_tree.uses_trees`` accepts. ``None``: rows.

    Returns:
        float32 ``[S, L]`` on ``input_ids``' device: ``ℓ^T`` on ``loss_mask``, 0 elsewhere.
    """
    if not (input_ids.shape == attention_mask.shape == loss_mask.shape) or input_ids.dim() != 2:
        raise ValueError(f"input_ids {tuple(input_ids.shape)}, attention_mask "
                         f"{tuple(attention_mask.shape)} and loss_mask {tuple(loss_mask.shape)} "
                         "must all be [S, L]")
    if len(texts) != input_ids.shape[0]:
        raise ValueError(f"got {len(texts)} skill texts for {input_ids.shape[0]} rows; pass the "
                         "skill of each row's task (one per step sample)")
    if micro_batch_size < 1:
        raise ValueError(f"micro_batch_size={micro_batch_size} must be >= 1")
    rows = _teacher_rows(splicer, input_ids, attention_mask, loss_mask, texts, allowed)
    trees = groups is not None and uses_trees(model, "trees")
    heads: dict[tuple[int, ...], list[_Row]] = {}
    for row in rows:
        heads.setdefault(row.shared if trees else (), []).append(row)
    out = torch.zeros(input_ids.shape, dtype=torch.float32)
    was_training = model.training
    model.eval()
    try:
        for head, members in heads.items():
            past = None
            if len(head) > 1:  # every member sees the head whole; its last token is re-fed
                past = trunk_forward(model, torch.tensor(head[:-1], dtype=torch.long))
            sequences = [[*head[-1:], *row.tail] if trees else [*row.shared, *row.tail]
                         for row in members]
            scored = _scored_rows(sequences, members)
            layout = (prefix_trees(scored.input_ids, scored.attention_mask.sum(1),
                                   scored.loss_mask.long().argmax(1),
                                   groups.cpu()[[row.index for row in members]])
                      if trees else row_trees(torch.arange(len(members)),
                                              scored.attention_mask))
            logprobs = score_trees(model, layout, scored, branch_batch=micro_batch_size,
                                   temperature=temperature, past=past)
            for i, (row, sequence) in enumerate(zip(members, sequences, strict=True)):
                end = len(sequence)
                out[row.index, row.start:row.start + row.scored] = \
                    logprobs[i, end - row.scored:end]
    finally:
        model.train(was_training)
    return (out * loss_mask.to(torch.float32).cpu()).to(input_ids.device)


def teacher_logprobs(model: nn.Module, splicer: SkillSplicer, provider: SkillProvider,
                     trajectories: Sequence[Trajectory], steps: StepTensors, *,
                     micro_batch_size: int, temperature: float = 1.0,
                     layout: str = "trees") -> Tensor:
    """``ℓ^T [S, L]`` of the batch's sampled tokens (docs/adrs.md §5.1), 0 off the response tokens.

    ``model`` must be the frozen behaviour snapshot: the policy that sampled the
    batch, before this update. The pass takes no gradient and changes no weight
    (``privileged_logprobs``; tested in the loop). Steps sampled with admissible decoding are
    scored over the same allowed sets (``steps.allowed``), at the policy's ``temperature``.
    Under ``layout = "trees"`` (``optim.layout``) each task's skill head is computed once and
    each trajectory's rows continue it as prefix trees.
    """
    skills = [provider.skill_text(t.task) for t in trajectories for _ in t.steps]
    return privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask,
                               steps.loss_mask, skills, micro_batch_size=micro_batch_size,
                               allowed=steps.allowed, temperature=temperature,
                               groups=steps.step_rollout if layout == "trees" else None)


def _teacher_rows(splicer: SkillSplicer, input_ids: Tensor, attention_mask: Tensor,
                  loss_mask: Tensor, texts: Sequence[str], allowed: Tensor | None) -> list[_Row]:
    ids, attn, mask = input_ids.cpu(), attention_mask.cpu().bool(), loss_mask.cpu().bool()
    lengths = attn.sum(1).tolist()
    rows = []
    for index, length in enumerate(lengths):
        if not attn[index, :length].all():
            raise ValueError(f"row {index}: attention_mask must be 1 on a prefix of the row "
                             "(right padding), as tensorize_steps builds it")
        positions = torch.nonzero(mask[index]).flatten()
        if positions.numel() == 0:
            raise ValueError(f"row {index} has no response token in loss_mask; every step "
                             "sample needs at least one")
        first, last = int(positions[0]), int(positions[-1])
        if first == 0 or last >= length:
            raise ValueError(f"row {index}: response tokens must follow a non-empty prompt and lie "
                             f"on real tokens (first at {first}, last at {last}, length {length})")
        shared, rest = splicer.splice(ids[index, :first].tolist(), texts[index])
        rows.append(_Row(index=index, shared=shared,
                         tail=rest + ids[index, first:length].tolist(),
                         scored=length - first, start=first,
                         allowed=None if allowed is None else allowed[index, first:length].cpu()))
    return rows


def _scored_rows(sequences: list[list[int]], rows: list[_Row]) -> Rows:
    """The privileged ``sequences`` right-padded, each scoring its row's last ``scored`` tokens
    (over their allowed sets where the row has them)."""
    lengths = torch.tensor([len(seq) for seq in sequences])
    width = int(lengths.max())
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    scored = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (seq, row) in enumerate(zip(sequences, rows, strict=True)):
        ids[i, :len(seq)] = torch.tensor(seq)
        scored[i, len(seq) - row.scored:len(seq)] = True
    allowed = None
    sets = [row.allowed for row in rows if row.allowed is not None]
    if sets:
        allowed = torch.full((len(rows), width, max(a.shape[1] for a in sets)), -1)
        for i, (seq, row) in enumerate(zip(sequences, rows, strict=True)):
            if row.allowed is not None:
                allowed[i, len(seq) - row.scored:len(seq), :row.allowed.shape[1]] = row.allowed
    attention = (torch.arange(width)[None] < lengths[:, None]).long()
    return Rows(ids, attention, scored, allowed)
