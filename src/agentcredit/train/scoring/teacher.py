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

**Prefix reuse.** The privileged prompt of step ``s`` of task ``x`` is
``shared(x) + rest_s`` where ``shared(x)`` = system turn + user header + skill
prefix, the same for every rollout and step of the task (often ~500 tokens of a
~1000-token sequence). With ``reuse_prefix=True`` rows are grouped by their
shared prefix, the prefix's key/value cache is computed once per group
(``shared[:-1]``; its last token is re-fed with every row so the first scored
logit always comes from the row's own forward) and expanded over each
micro-batch; the rows then run only ``shared[-1] + rest + response``, with
position ids continuing after the prefix. ``reuse_prefix=False`` runs the full
privileged sequences; both give the same log-probs up to float rounding
(tested to 1e-4).

**Prefix trees.** With ``groups`` (the trajectory of each row; ``teacher_logprobs`` passes
them under ``optim.layout=trees``) the privileged rows of a trajectory run as prefix trees
instead (docs/backbones.md §0.1): its skill prefix and every history line its steps share
are computed once per trajectory. With ``reuse_prefix`` too, the path that computes fewer
tokens runs: trees where histories are long, the per-task cache where they are short and a
task has many rollouts.

Two further savings apply to both row paths: rows are sorted by length before
micro-batching (less padding), and the LM head runs only on the columns that
predict response tokens (``logits_to_keep``; rows are left-padded so those
columns line up), not on the ~1000 prompt positions. Requires a Hugging Face
causal LM whose ``forward`` accepts ``logits_to_keep`` and ``past_key_values``
(Qwen2, Llama, Mistral, … in transformers 5) and, for reuse, full attention in
every layer.

Output layout: ``[S, L]`` aligned with the input rows, like
``scoring.token_logprobs``: entry ``(s, l)`` is ``ℓ^T`` of token ``l`` of row
``s`` on ``loss_mask`` positions and 0 elsewhere, so
``TokenScores.from_step_rows(loss_mask, teacher, ...)`` takes it as is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from transformers import DynamicCache

from agentcredit.rollout.policy import has_full_attention
from agentcredit.rollout.records import Trajectory
from agentcredit.skills.prefix import SkillSplicer
from agentcredit.skills.provider import SkillProvider
from agentcredit.train.prefix_tree import prefix_trees, uses_trees
from agentcredit.train.scoring.logprobs import logprob_entropy_rows
from agentcredit.train.scoring.tree_logprobs import tree_logprobs
from agentcredit.train.step_tensors import StepTensors


@dataclass
class _Row:
    """One step sample rewritten for the teacher: ``shared + tail``, last ``scored`` tokens
    scored."""

    index: int  # row of the input
    shared: tuple[int, ...]  # prompt head + skill prefix, identical for every step of a task
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
    reuse_prefix: bool = True,
    allowed: Tensor | None = None,
    temperature: float = 1.0,
    groups: Tensor | None = None,
) -> Tensor:
    """``ℓ^T`` of every response token, with each row's skill inserted into its prompt.

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
        reuse_prefix: compute each task's shared prefix once and reuse its KV cache.
        allowed: ``[S, L, K]`` allowed ids per token (admissible decoding, −1 padded,
            ``StepTensors.allowed``): the teacher renormalises over the same sets the
            sampler did. ``None``: the whole vocabulary.
        temperature: the policy's ``T``: ``ℓ^T`` is scored under ``softmax(z / T)``, as the
            student's ``ℓ^b`` is.
        groups: ``[S]`` the trajectory of each row: the privileged rows of a trajectory run as
            prefix trees (``train.prefix_tree``; the skill and every shared history line once
            per trajectory) on any model ``train.prefix_tree.uses_trees`` accepts, unless with
            ``reuse_prefix`` the per-task cache computes fewer tokens (short histories, many
            rollouts per task). ``None``: rows (with or without ``reuse_prefix``).

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
    if reuse_prefix:
        _check_full_attention(model)
    rows = _teacher_rows(splicer, input_ids, attention_mask, loss_mask, texts, allowed)
    out = torch.zeros(input_ids.shape, dtype=torch.float32)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            # the per-task cache computes each task's shared prefix once and every row's tail
            cached = (sum(len(shared) for shared in {row.shared for row in rows})
                      + sum(len(row.tail) + 1 for row in rows)) if reuse_prefix else None
            ran = groups is not None and uses_trees(model, "trees") and _score_trees(
                model, rows, groups, micro_batch_size, out, temperature, cached)
            if not ran and reuse_prefix:
                by_prefix: dict[tuple[int, ...], list[_Row]] = {}
                for row in rows:
                    by_prefix.setdefault(row.shared, []).append(row)
                for shared, members in by_prefix.items():
                    past = prefix_cache(model, shared[:-1])
                    _score_rows(model, members, past, len(shared) - 1,
                                [[shared[-1], *row.tail] for row in members],
                                micro_batch_size, out, temperature)
            elif not ran:
                _score_rows(model, rows, None, 0, [[*row.shared, *row.tail] for row in rows],
                            micro_batch_size, out, temperature)
    finally:
        model.train(was_training)
    return (out * loss_mask.to(torch.float32).cpu()).to(input_ids.device)


def teacher_logprobs(model: nn.Module, splicer: SkillSplicer, provider: SkillProvider,
                     trajectories: Sequence[Trajectory], steps: StepTensors, *,
                     micro_batch_size: int, reuse_prefix: bool,
                     temperature: float = 1.0, layout: str = "trees") -> Tensor:
    """``ℓ^T [S, L]`` of the batch's sampled tokens (docs/adrs.md §5.1), 0 off the response tokens.

    ``model`` must be the frozen behaviour snapshot: the policy that sampled the
    batch, before this update. The pass takes no gradient and changes no weight
    (``privileged_logprobs``; tested in the loop). Steps sampled with admissible decoding are
    scored over the same allowed sets (``steps.allowed``), at the policy's ``temperature``.
    Under ``layout = "trees"`` (``optim.layout``) each trajectory's rows run as prefix trees.
    """
    skills = [provider.skill_text(t.task) for t in trajectories for _ in t.steps]
    return privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask,
                               steps.loss_mask, skills, micro_batch_size=micro_batch_size,
                               reuse_prefix=reuse_prefix, allowed=steps.allowed,
                               temperature=temperature,
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


def _score_trees(model: nn.Module, rows: list[_Row], groups: Tensor, micro_batch_size: int,
                 out: Tensor, temperature: float, cached: int | None) -> bool:
    """Score the privileged sequences ``shared + tail`` as prefix trees into ``out``, unless
    the trees would compute more tokens than ``cached`` (the per-task cache's count; ``None``:
    no cache); whether they ran."""
    sequences = [[*row.shared, *row.tail] for row in rows]
    lengths = torch.tensor([len(seq) for seq in sequences])
    width = int(lengths.max())
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    scored = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (seq, row) in enumerate(zip(sequences, rows, strict=True)):
        ids[i, :len(seq)] = torch.tensor(seq)
        scored[i, len(seq) - row.scored:len(seq)] = True
    attention = (torch.arange(width)[None] < lengths[:, None]).long()
    allowed = None
    if any(row.allowed is not None for row in rows):
        allowed = torch.full((len(rows), width, max(row.allowed.shape[1] for row in rows
                                                     if row.allowed is not None)), -1)
        for i, row in enumerate(rows):
            if row.allowed is not None:
                allowed[i, len(sequences[i]) - row.scored:len(sequences[i]),
                        :row.allowed.shape[1]] = row.allowed
    first = lengths - torch.tensor([row.scored for row in rows])
    trees = prefix_trees(ids, lengths, first, groups.cpu()[[row.index for row in rows]])
    if cached is not None and sum(tree.tokens(lengths) for tree in trees) > cached:
        return False
    for tree in trees:
        logprobs, _ = tree_logprobs(model, tree, ids, attention, scored,
                                    branch_batch=micro_batch_size, allowed=allowed,
                                    temperature=temperature)
        for i, k in enumerate(tree.rows.tolist()):
            row, end = rows[k], len(sequences[k])
            out[row.index, row.start:row.start + row.scored] = logprobs[i, end - row.scored:end]
    return True


def _check_full_attention(model: nn.Module) -> None:
    if not has_full_attention(model):
        raise ValueError(f"prefix reuse needs full attention in every layer, but this "
                         f"{type(model).__name__} uses sliding-window layers; call "
                         "privileged_logprobs(..., reuse_prefix=False)")


def prefix_cache(model: nn.Module, prefix: Sequence[int]) -> list[tuple[Tensor, Tensor]] | None:
    """Per-layer ``(keys, values)`` ``[1, heads, P, d]`` of ``prefix``; ``None`` when it is empty.

    Call under ``torch.no_grad()``; ``privileged_logprobs`` computes one per task.
    """
    if not prefix:
        return None
    device = next(model.parameters()).device
    ids = torch.tensor([list(prefix)], dtype=torch.long, device=device)
    cache = model(input_ids=ids, use_cache=True, logits_to_keep=1).past_key_values
    return [(layer.keys, layer.values) for layer in cache.layers]


def _score_rows(model: nn.Module, rows: list[_Row], past: list[tuple[Tensor, Tensor]] | None,
                past_len: int, sequences: list[list[int]], micro_batch_size: int,
                out: Tensor, temperature: float) -> None:
    """Score the last ``row.scored`` tokens of each sequence (after ``past``) into ``out``."""
    order = sorted(range(len(rows)), key=lambda k: len(sequences[k]))
    for start in range(0, len(order), micro_batch_size):
        chunk = order[start:start + micro_batch_size]
        scores = _score_block(model, past, past_len, [sequences[k] for k in chunk],
                              [rows[k].scored for k in chunk], [rows[k].allowed for k in chunk],
                              temperature)
        for k, lp in zip(chunk, scores, strict=True):
            row = rows[k]
            out[row.index, row.start:row.start + row.scored] = lp


def _score_block(model: nn.Module, past: list[tuple[Tensor, Tensor]] | None, past_len: int,
                 sequences: list[list[int]], scored: list[int],
                 allowed: list[Tensor | None], temperature: float) -> list[Tensor]:
    """Log-probs at ``temperature`` of the last ``scored[i]`` tokens of each sequence, given the
    cached ``past`` (renormalised over ``allowed[i]`` ``[scored[i], K]`` where given).

    Sequences are left-padded to one length so their ends line up: the
    ``keep = max(scored) + 1`` last columns hold every logit needed (column
    ``c`` predicts token ``c + 1``), and the LM head runs on those only.
    """
    device = next(model.parameters()).device
    b, length = len(sequences), max(len(seq) for seq in sequences)
    ids = torch.zeros((b, length), dtype=torch.long)
    mask = torch.zeros((b, length), dtype=torch.long)
    for i, seq in enumerate(sequences):
        ids[i, length - len(seq):] = torch.tensor(seq)
        mask[i, length - len(seq):] = 1
    ids, mask = ids.to(device), mask.to(device)
    position_ids = past_len + (mask.cumsum(-1) - 1).clamp(min=0)  # [b, Ls]
    full_mask = torch.cat([mask.new_ones(b, past_len), mask], dim=1)  # [b, P + Ls]
    cache = None
    if past is not None:
        cache = DynamicCache(ddp_cache_data=[(keys.expand(b, -1, -1, -1),
                                              values.expand(b, -1, -1, -1))
                                             for keys, values in past])
    keep = max(scored) + 1
    logits = model(input_ids=ids, attention_mask=full_mask, position_ids=position_ids,
                   past_key_values=cache, use_cache=cache is not None,
                   logits_to_keep=keep).logits  # [b, keep, V]
    targets = ids[:, length - keep + 1:]  # [b, keep − 1], predicted by logits[:, :-1]
    sets = None
    if any(a is not None for a in allowed):  # right-aligned like the scored tokens
        width = max(a.shape[1] for a in allowed if a is not None)
        sets = torch.full((b, keep - 1, width), -1, dtype=torch.long)
        for i, (a, n) in enumerate(zip(allowed, scored, strict=True)):
            if a is not None:
                sets[i, keep - 1 - n:, :a.shape[1]] = a
        sets = sets.reshape(b * (keep - 1), width)
    logprobs, _ = logprob_entropy_rows(logits[:, :-1].reshape(b * (keep - 1), -1),
                                        targets.reshape(-1), with_entropy=False, allowed=sets,
                                        temperature=temperature)
    logprobs = logprobs.view(b, keep - 1).float().cpu()
    return [logprobs[i, keep - 1 - n:] for i, n in enumerate(scored)]
