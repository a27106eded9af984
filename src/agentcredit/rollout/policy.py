"""The ``Policy`` protocol the collector samples from, and its Hugging Face implementation.

A policy turns a batch of prompts (token ids) into responses (token ids plus
the log-prob each sampled token had under the sampling distribution). The
collector never sees the model; a vLLM policy would implement the same
protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor
from transformers import DynamicCache

from agentcredit.config.schema import ConfigError
from agentcredit.rollout.admissible import ActionTrie, pack_sets, restrict_logits
from agentcredit.rollout.grouped_attention import grouped_attention

PREFILL_ROWS = 8  # distinct prompts prefilled in one forward
CDF_BLOCK = 512  # ids per block of ``inverse_cdf``'s first level (Qwen's 151,936: 297 blocks)


class PolicyDiverged(ConfigError):
    """The policy's probabilities are NaN: training (its learning rate) blew the weights up."""


@dataclass
class Generation:
    """One sampled response.

    Attributes:
        token_ids: the sampled ids; ends with a stop token unless ``max_new_tokens`` cut it.
        logprobs: per token, ``log p(y_j | prompt, y_<j)`` under the sampling
            distribution (logits / temperature; greedy decoding records the
            untempered log-prob).
        text: the decoded response without stop tokens.
        allowed_ids: with a trie (admissible decoding), per token the ids it was
            sampled among, ``C(y_<j)`` of ``rollout.admissible``; else ``None``.
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    allowed_ids: list[list[int]] | None = None


class PromptCache:
    """The key/value caches of the prompts a policy sampled from at the previous step.

    A collector opens one per ``collect`` call, while the weights stay fixed, and passes it
    to every ``generate`` call of that collection. Keys and values of a token prefix depend
    only on its tokens (causal attention, absolute positions), so a prompt that begins like a
    cached one, as each step's prompt begins like the previous step's under a long history,
    prefills only the tokens after the shared prefix. The policy replaces the entries at
    every call: at most one step of prompts is held.

    Attributes:
        prompts: ``[N, L]`` the cached prompts' ids, right-padded with ``-1``.
        layers: per layer, ``(keys, values)`` ``[N, heads, L, d]``, right-padded like
            ``prompts``.
    """

    def __init__(self) -> None:
        self.prompts: Tensor | None = None
        self.layers: list[tuple[Tensor, Tensor]] = []

    def longest_prefixes(self, prompts: Tensor) -> tuple[Tensor, Tensor]:
        """For each of ``prompts [B, L']`` (``-1``-padded), the cached entry sharing its longest
        token prefix and that prefix's length: ``(entry [B], shared [B])``; ``shared`` is 0 with
        an empty cache."""
        if self.prompts is None:
            zeros = torch.zeros(len(prompts), dtype=torch.long)
            return zeros, zeros
        width = min(prompts.shape[1], self.prompts.shape[1])
        same = prompts[:, None, :width] == self.prompts[None, :, :width]  # [B, N, W]
        same &= prompts[:, None, :width] >= 0
        shared = same.long().cumprod(-1).sum(-1)  # [B, N]
        best, entry = shared.max(-1)
        return entry, best


class Policy(Protocol):
    """Anything that samples responses for a batch of prompts."""

    tokenizer: object

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        temperature: float,
        max_new_tokens: int,
        generator: torch.Generator,
        tries: Sequence[ActionTrie | None] | None = None,
        prompt_cache: PromptCache | None = None,
    ) -> list[Generation]:
        """One response per prompt; ``temperature = 0`` is greedy decoding.

        ``generator``: all sampling randomness comes from it, so a run that saves and restores
        its state resumes exactly. ``HFPolicy`` draws on the model's device; a generator there
        keeps every draw on it (a CPU generator also works, its draws copied over).
        ``tries`` (one per prompt) restricts each response to the commands of its
        trie (``rollout.admissible``); such a response always ends with the
        end-of-turn token, however long the command (``max_new_tokens`` does not cut it).
        ``prompt_cache``: reuse of the previous step's prompt caches (``PromptCache``); a
        policy without a cache of its own ignores it.
        """


class HFPolicy:
    """Batched sampling from a ``transformers`` causal LM with a KV cache.

    Distinct prompts are prefilled ``PREFILL_ROWS`` at a time in order of length (little
    padding; a prompt that occurs several times in a batch, as a task's rollouts at their
    first step, once); their keys and values are then left-padded into one ``[B, h, L, d]``
    cache and each
    decoding step samples one token for every unfinished row, on the model's device
    (``sample_token``: one uniform per row); a row finishes at a stop
    token (the tokenizer's eos ``<|im_end|>`` and the model's generation eos
    ids). Logits of ids the tokenizer cannot produce (the spare rows of an
    embedding table rounded up in size) are masked out, so every sampled id
    decodes. Given a ``PromptCache``, each prompt prefills only the tokens after
    the longest prefix it shares with the previous call's prompts; models with
    sliding-window layers, whose keys depend on more than the prefix, always
    prefill the whole prompt. Sampling runs under ``torch.inference_mode`` and, for an
    ``sdpa`` model, with ``grouped_sdpa`` attention (``rollout.grouped_attention``: the same
    attention without copying the KV cache once per query head at every token).

    Args:
        model: the causal LM (any device); it is put in eval mode while sampling
            and its previous mode restored.
        tokenizer: its tokenizer (pad token set, as ``load_policy`` ensures).
        micro_batch_size: prompts sampled together; larger batches are split.
    """

    def __init__(self, model, tokenizer, micro_batch_size: int = 64):
        self.model = model
        self.tokenizer = tokenizer
        self.micro_batch_size = micro_batch_size
        stop = {tokenizer.eos_token_id}
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if gen_eos is not None:
            stop.update(gen_eos if isinstance(gen_eos, list) else [gen_eos])
        self.stop_ids = sorted(i for i in stop if i is not None)
        self.num_producible = len(tokenizer)
        self.full_attention = has_full_attention(model)

    @torch.inference_mode()
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        temperature: float,
        max_new_tokens: int,
        generator: torch.Generator,
        tries: Sequence[ActionTrie | None] | None = None,
        prompt_cache: PromptCache | None = None,
    ) -> list[Generation]:
        """``Policy.generate``, ``micro_batch_size`` prompts at a time.

        Logits never leave the model's device; a decoding step syncs with the host once, to
        learn whether every row has finished or a log-prob is NaN (``PolicyDiverged``) and,
        with ``tries``, which ids were sampled (the trie walk runs on the host). The ids and
        log-probs come back once, after the last step.

        Over 80 lines, not yet split: the decode loop shares a dozen per-micro-batch tensors
        (finished rows, trie nodes, caches, masks); a decode-state record is the way to split it.
        """
        if tries is not None and len(tries) != len(prompts):
            raise ValueError(f"got {len(tries)} tries for {len(prompts)} prompts; pass one per "
                             "prompt (None for an unrestricted one)")
        was_training = self.model.training
        self.model.eval()
        cache = prompt_cache if self.full_attention else None
        device = next(self.model.parameters()).device
        stop_ids = torch.tensor(self.stop_ids, device=device)
        out: list[Generation] = []
        stored: list[tuple[list[int], list[tuple[Tensor, Tensor]]]] = []
        try:
            with grouped_attention(self.model):
                for start in range(0, len(prompts), self.micro_batch_size):
                    batch = [list(p) for p in prompts[start:start + self.micro_batch_size]]
                    batch_tries = tries[start:start + len(batch)] if tries else None
                    rows = len(batch)
                    # PREFILL: the first token's logits [B, V] and the left-padded prompt caches
                    logits, past, attention_mask = self._prefilled(batch, cache, stored, device)
                    position_ids = torch.tensor([[len(p)] for p in batch], device=device)
                    # DECODE: one token per row and step until every row has stopped
                    nodes = ([trie.root if trie else None for trie in batch_tries]
                             if batch_tries else None)
                    # every row in a trie: sample among its ids alone (a row whose command
                    # ended draws a pad it drops); else mask the logits of the rows in one
                    gathered = bool(batch_tries) and all(batch_tries)
                    row_allowed: list[list[list[int]]] = [[] for _ in range(rows)]
                    steps = max([max_new_tokens] + [t.depth for t in batch_tries or () if t])
                    finished = torch.zeros(rows, dtype=torch.bool, device=device)
                    tokens: list[Tensor] = []  # each [B]
                    logprobs: list[Tensor] = []  # each [B]
                    for step in range(steps):
                        allowed = None
                        if nodes is not None:  # sent before the forward: no wait on the copy
                            sets = [sorted(node) if node else [] for node in nodes]
                            for row, ids in enumerate(sets):
                                row_allowed[row].append(ids)
                            if gathered:
                                sets = [ids or [self.tokenizer.pad_token_id] for ids in sets]
                            allowed = pack_sets(sets).to(device, non_blocking=True)  # [B, K]
                        if step:  # the prefill fed the prompts' last token
                            attention_mask = torch.cat(
                                [attention_mask, attention_mask.new_ones(rows, 1)], 1)
                            output = self.model(input_ids=tokens[-1][:, None],
                                                attention_mask=attention_mask,
                                                position_ids=position_ids, past_key_values=past,
                                                use_cache=True, logits_to_keep=1)
                            past, logits = output.past_key_values, output.logits[:, -1, :]
                            position_ids = position_ids + 1
                        logits = logits.float()  # [B, V]
                        logits[:, self.num_producible:] = -torch.inf
                        if allowed is not None and not gathered:
                            logits = restrict_logits(logits, allowed)
                        token, logprob = sample_token(logits, temperature, generator,
                                                      allowed if gathered else None)  # [B], [B]
                        tokens.append(torch.where(finished, self.tokenizer.pad_token_id, token))
                        logprobs.append(torch.where(finished, 0.0, logprob))
                        finished |= torch.isin(tokens[-1], stop_ids)
                        # the step's one sync: all finished, any NaN, and the ids for the tries
                        flags = torch.stack([finished.all(), logprob.isnan().any()]).long()
                        done, diverged, *ids = torch.cat(
                            [flags, tokens[-1] if nodes is not None else flags[:0]]).tolist()
                        if diverged:
                            raise PolicyDiverged("the policy's next-token probabilities hold "
                                                 "NaN: its weights have diverged")
                        if nodes is not None:
                            nodes = [node.get(tok) if node else None
                                     for node, tok in zip(nodes, ids, strict=True)]
                        if done:
                            break
                    past = output = None  # the decoding cache goes before the next batch's
                    # RESPONSES: cut at the first stop token
                    out += self._responses(torch.stack(tokens, 1).cpu(),
                                           torch.stack(logprobs, 1).cpu(), row_allowed,
                                           batch_tries)
            if cache is not None and stored:
                _refill(cache, stored)
            return out
        finally:
            self.model.train(was_training)

    def _responses(self, sampled: Tensor, logprobs: Tensor, row_allowed: list[list[list[int]]],
                   tries: Sequence[ActionTrie | None] | None) -> list[Generation]:
        """One ``Generation`` per row of ``sampled`` and ``logprobs`` ``[B, T]``, cut after
        its first stop token."""
        out = []
        stop_set = set(self.stop_ids)
        for row, ids in enumerate(sampled.tolist()):
            keep = next((j + 1 for j, tok in enumerate(ids) if tok in stop_set), len(ids))
            ids = ids[:keep]
            out.append(Generation(
                token_ids=ids,
                logprobs=logprobs[row, :keep].tolist(),
                text=self.tokenizer.decode([t for t in ids if t not in stop_set],
                                           skip_special_tokens=False),
                allowed_ids=row_allowed[row][:keep] if tries and tries[row] else None,
            ))
        return out

    def _prefilled(self, prompts: list[list[int]], cache: PromptCache | None, stored: list,
                   device) -> tuple[Tensor, DynamicCache, Tensor]:
        """Prefill ``prompts`` (a micro-batch; a prompt that occurs several times, once).
        Returns the logits of each row's first response token ``[B, V]``, the prompts' keys
        and values left-padded into one ``DynamicCache`` (``[B, h, width, d]`` per layer) and
        its attention mask ``[B, width]``. Without a prompt cache the per-prompt keys and values
        are let go layer by layer as the batch is built, so decoding holds only the batch."""
        unique: dict[tuple[int, ...], int] = {}  # a prompt -> its prefill row
        row_of = [unique.setdefault(tuple(p), len(unique)) for p in prompts]
        logits, caches = self._prefill([list(p) for p in unique], cache, stored, device)
        lengths = torch.tensor([len(p) for p in prompts])
        width = int(lengths.max())
        layers = []
        for layer in range(len(caches[0])):
            layers.append(tuple(_left_padded([caches[r][layer][part] for r in row_of], width)
                                for part in (0, 1)))
            if cache is None:
                for per_prompt in caches:
                    per_prompt[layer] = None
        attention_mask = (torch.arange(width)[None, :] >= (width - lengths)[:, None]).long()
        return (logits[torch.tensor(row_of, device=device)], DynamicCache(ddp_cache_data=layers),
                attention_mask.to(device))

    def _prefill(self, prompts: list[list[int]], cache: PromptCache | None,
                 stored: list, device) -> tuple[Tensor, list[list[tuple[Tensor, Tensor]]]]:
        """Run ``prompts`` (distinct) through the model after the longest prefix each shares with
        a cached prompt, ``PREFILL_ROWS`` at a time in order of length (so a batch holds little
        padding). Returns the logits of each prompt's next token ``[N, V]`` and, per prompt, per
        layer, its keys and values ``[h, len, d]`` (also appended to ``stored`` with a cache,
        for ``_refill``)."""
        lengths = torch.tensor([len(p) for p in prompts])
        entry = reused = torch.zeros(len(prompts), dtype=torch.long)
        if cache is not None:
            entry, shared = cache.longest_prefixes(_padded(prompts, -1))
            reused = torch.minimum(shared, lengths - 1)  # at least one token is prefilled
        new = lengths - reused  # [N] tokens to prefill
        order = sorted(range(len(prompts)), key=lambda i: (int(new[i]), int(reused[i])))
        logits: list[Tensor | None] = [None] * len(prompts)
        caches: list[list[tuple[Tensor, Tensor]] | None] = [None] * len(prompts)
        for start in range(0, len(order), PREFILL_ROWS):
            rows = order[start:start + PREFILL_ROWS]
            p, n = reused[rows], new[rows]
            past_len, width = int(p.max()), int(n.max())
            input_ids = torch.full((len(rows), width), self.tokenizer.pad_token_id)
            columns = torch.arange(past_len + width)[None, :]  # both parts left-padded
            attention_mask = (((columns >= past_len - p[:, None]) & (columns < past_len))
                              | (columns >= past_len + width - n[:, None])).long()
            for j, row in enumerate(rows):
                input_ids[j, width - int(n[j]):] = torch.tensor(prompts[row][int(p[j]):])
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, past_len:]
            past = None
            if past_len:
                past = DynamicCache(ddp_cache_data=[
                    (_right_aligned(keys, entry[rows], p, past_len),
                     _right_aligned(values, entry[rows], p, past_len))
                    for keys, values in cache.layers])
            output = self.model(input_ids=input_ids.to(device),
                                attention_mask=attention_mask.to(device),
                                position_ids=position_ids.to(device), past_key_values=past,
                                use_cache=True, logits_to_keep=1)
            for j, row in enumerate(rows):
                keep = attention_mask[j].nonzero().flatten().to(device)  # the prompt's positions
                logits[row] = output.logits[j, -1]
                caches[row] = [(layer.keys[j][:, keep], layer.values[j][:, keep])
                               for layer in output.past_key_values.layers]
        if cache is not None:
            stored += zip(prompts, caches, strict=True)
        return torch.stack(logits), caches


def has_full_attention(model) -> bool:
    """Whether every layer of ``model`` attends to the whole prefix (no sliding window), so
    the keys and values of a token prefix can be computed once and reused."""
    config = getattr(model, "config", None)
    return not getattr(config, "use_sliding_window", False) and all(
        kind == "full_attention" for kind in getattr(config, "layer_types", None) or [])


def _padded(rows: Sequence[Sequence[int]], value: int) -> Tensor:
    """``rows`` as one ``[B, max length]`` tensor, right-padded with ``value``."""
    out = torch.full((len(rows), max(len(r) for r in rows)), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def _right_aligned(cached: Tensor, entry: Tensor, take: Tensor, width: int) -> Tensor:
    """Row ``i``: the first ``take[i]`` positions of cache entry ``entry[i]`` (``cached [N, h, L,
    d]``), right-aligned in ``[B, h, width, d]`` after zeros (masked-out positions)."""
    out = cached.new_zeros((len(entry), cached.shape[1], width, cached.shape[3]))
    for i, (e, n) in enumerate(zip(entry.tolist(), take.tolist(), strict=True)):
        if n:
            out[i, :, width - n:] = cached[e, :, :n]
    return out


def _left_padded(rows: Sequence[Tensor], width: int) -> Tensor:
    """``rows`` (each ``[h, len, d]``) right-aligned in one ``[B, h, width, d]`` tensor after zeros
    (masked-out positions)."""
    first = rows[0]
    out = first.new_zeros((len(rows), first.shape[0], width, first.shape[2]))
    for i, row in enumerate(rows):
        out[i, :, width - row.shape[1]:] = row
    return out


def _refill(cache: PromptCache, stored: list[tuple[list[int], list[tuple[Tensor, Tensor]]]]
            ) -> None:
    """Replace ``cache``'s entries by this call's prompts and their keys and values, emptying
    ``stored`` layer by layer as it goes."""
    prompts = [prompt for prompt, _ in stored]
    cache.prompts = _padded(prompts, -1)
    width = cache.prompts.shape[1]
    cache.layers = []
    for layer in range(len(stored[0][1])):
        keys, values = stored[0][1][layer]
        shape = (len(stored), keys.shape[0], width, keys.shape[2])
        all_keys, all_values = keys.new_zeros(shape), values.new_zeros(shape)
        for i, (prompt, layers) in enumerate(stored):
            all_keys[i, :, :len(prompt)], all_values[i, :, :len(prompt)] = layers[layer]
            layers[layer] = None  # copied: let it go, so no second copy of every layer is held
        cache.layers.append((all_keys, all_values))


def sample_token(logits: Tensor, temperature: float, generator: torch.Generator,
                 allowed: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Sample one token per row of ``logits [B, V]``; returns ids and their log-probs ``[B]``,
    both on the logits' device, without waiting on it.

    The log-probs are ``log_softmax(logits / temperature)`` at the ids (untempered at
    ``temperature = 0``, which takes the argmax). A sample is one uniform ``u`` per row from
    ``generator``, inverted through the row's cumulative probabilities (``inverse_cdf``);
    an id of probability 0 (a masked logit) is never drawn. ``generator`` may live on the
    logits' device or on the CPU (its ``B`` uniforms are then copied over).

    ``allowed``: ``[B, K]`` ids, −1 padded, every row holding at least one: each row samples
    among its ids alone, renormalised (``p̃`` of ``rollout.admissible``, the distribution of
    ``restrict_logits``), reading ``K`` logits of the row rather than ``V``.

    A row with a NaN or ``+inf`` logit has a NaN log-prob (its softmax is NaN throughout) and
    an id in ``[0, V)``: the caller raises ``PolicyDiverged`` where it syncs anyway
    (``HFPolicy.generate``).
    """
    if allowed is not None:
        ids = allowed.clamp(min=0)  # [B, K]
        token, logprob = sample_token(logits.gather(-1, ids).masked_fill(allowed < 0, -torch.inf),
                                      temperature, generator)
        return ids.gather(-1, token[:, None]).squeeze(-1), logprob
    if temperature == 0:
        token = logits.argmax(-1)
        return token, logits.gather(-1, token[:, None]).squeeze(-1) - logits.logsumexp(-1)
    scaled = logits if temperature == 1 else logits / temperature  # [B, V]
    top = scaled.amax(-1, keepdim=True)  # [B, 1]
    weights = scaled.sub(top).exp_()  # [B, V] unnormalised probabilities, the largest 1
    u = torch.rand(len(logits), 1, generator=generator, device=generator.device,
                   dtype=torch.float64)  # [B, 1]
    token, total = inverse_cdf(weights, u.to(logits.device))
    logprob = (scaled.gather(-1, token[:, None]) - top).squeeze(-1) - total.log()
    return token, logprob.to(logits.dtype)


def inverse_cdf(weights: Tensor, u: Tensor) -> tuple[Tensor, Tensor]:
    """The ids ``[B]`` that uniforms ``u [B, 1]`` in ``[0, 1)`` select from non-negative
    ``weights [B, V]``, and each row's total weight ``[B]``: per row the first id whose
    cumulative weight exceeds ``u · total``; an id of weight 0 is never returned, whatever
    ``u`` (1 included).

    In two levels, so only the weights' block sums read the whole row: the row's
    ``CDF_BLOCK``-id blocks are summed, ``u · total`` selects a block among the sums, and what
    remains of it selects an id among the block's weights (running sums in float64).
    """
    rows, vocab = weights.shape
    full = vocab // CDF_BLOCK * CDF_BLOCK
    sums = weights[:, :full].reshape(rows, -1, CDF_BLOCK).sum(-1)  # [B, V // CDF_BLOCK]
    if full < vocab:  # the last, shorter block
        sums = torch.cat([sums, weights[:, full:].sum(-1, keepdim=True)], 1)
    sums = sums.double()  # a block's own sum is exact enough; their running sum is float64
    total = sums.sum(-1, keepdim=True)  # [B, 1]
    target = u * total  # [B, 1]
    block, before = _first_exceeding(sums, target)  # [B, 1] each
    ids = block * CDF_BLOCK + torch.arange(CDF_BLOCK, device=weights.device)  # [B, CDF_BLOCK]
    inside = weights.gather(-1, ids.clamp(max=vocab - 1)).double().masked_fill(ids >= vocab, 0)
    offset, _ = _first_exceeding(inside, target - before)
    return ids.gather(-1, offset).squeeze(-1), total.squeeze(-1)


def _first_exceeding(weights: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Per row of ``weights [B, N]`` (float64, non-negative) the first index whose cumulative
    weight exceeds ``target [B, 1]``, and the cumulative weight before it ``[B, 1]``.

    ``target`` is held in ``[0, total)`` (rounding can push ``u · total`` up to the total, where
    no cumulative weight exceeds it), so the index is one where the cumulative weight steps up;
    a parallel scan (off the CPU) may step by a rounding at a zero weight, so an index of weight
    0 moves to the last index of positive weight before it (there is one: the sums before the
    first positive weight are exactly 0, never above a target >= 0).
    """
    cdf = weights.cumsum(-1)  # [B, N]
    total = cdf[:, -1:]
    target = target.clamp(min=0).minimum(total.nextafter(total.new_zeros(())))
    index = torch.searchsorted(cdf, target, right=True).clamp(max=weights.shape[-1] - 1)
    positions = torch.arange(weights.shape[-1], device=weights.device)
    index = torch.where(weights > 0, positions, 0).cummax(-1).values.gather(-1, index)
    return index, cdf.gather(-1, index) - weights.gather(-1, index)
