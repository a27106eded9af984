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

from agentcredit.rollout.admissible import ActionTrie, pack_sets, restrict_logits


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
    ) -> list[Generation]:
        """One response per prompt; ``temperature = 0`` is greedy decoding.

        ``generator`` is a CPU ``torch.Generator``: all sampling randomness comes
        from it, so a run that saves and restores its state resumes exactly.
        ``tries`` (one per prompt) restricts each response to the commands of its
        trie (``rollout.admissible``); such a response always ends with the
        end-of-turn token, however long the command (``max_new_tokens`` does not cut it).
        """


class HFPolicy:
    """Batched sampling from a ``transformers`` causal LM with a KV cache.

    Prompts are left-padded into one ``[B, L]`` batch; each decoding step
    samples one token for every unfinished row, and a row finishes at a stop
    token (the tokenizer's eos ``<|im_end|>`` and the model's generation eos
    ids). Logits of ids the tokenizer cannot produce (the spare rows of an
    embedding table rounded up in size) are masked out, so every sampled id
    decodes.

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

    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        temperature: float,
        max_new_tokens: int,
        generator: torch.Generator,
        tries: Sequence[ActionTrie | None] | None = None,
    ) -> list[Generation]:
        if tries is not None and len(tries) != len(prompts):
            raise ValueError(f"got {len(tries)} tries for {len(prompts)} prompts; pass one per "
                             "prompt (None for an unrestricted one)")
        was_training = self.model.training
        self.model.eval()
        try:
            out: list[Generation] = []
            for start in range(0, len(prompts), self.micro_batch_size):
                end = start + self.micro_batch_size
                out += self._generate_batch(prompts[start:end], temperature, max_new_tokens,
                                            generator, tries[start:end] if tries else None)
            return out
        finally:
            self.model.train(was_training)

    def _generate_batch(self, prompts, temperature, max_new_tokens, generator, tries):
        device = next(self.model.parameters()).device
        batch = len(prompts)
        length = max(len(p) for p in prompts)
        pad_id = self.tokenizer.pad_token_id
        input_ids = torch.full((batch, length), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((batch, length), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding
            input_ids[row, length - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
            attention_mask[row, length - len(prompt):] = 1
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        stop_ids = torch.tensor(self.stop_ids, device=device)

        tokens: list[Tensor] = []  # each [B]
        logprobs: list[Tensor] = []  # each [B]
        nodes = [trie.root if trie else None for trie in tries] if tries else None
        row_allowed: list[list[list[int]]] = [[] for _ in range(batch)]
        if nodes is not None:
            max_new_tokens = max([max_new_tokens] + [t.depth for t in tries if t])
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        past = None
        step_ids = input_ids
        for _ in range(max_new_tokens):
            output = self.model(input_ids=step_ids, attention_mask=attention_mask,
                                position_ids=position_ids, past_key_values=past,
                                use_cache=True, logits_to_keep=1)
            past = output.past_key_values
            logits = output.logits[:, -1, :].float().cpu()  # [B, V]
            logits[:, self.num_producible:] = -torch.inf
            if nodes is not None:
                sets = [sorted(node) if node else [] for node in nodes]
                for row, allowed in enumerate(sets):
                    row_allowed[row].append(allowed)
                logits = restrict_logits(logits, pack_sets(sets))
            token, logprob = _sample(logits, temperature, generator)  # [B], [B] on CPU
            if nodes is not None:
                nodes = [node.get(int(tok)) if node else None
                         for node, tok in zip(nodes, token.tolist(), strict=True)]
            token, logprob = token.to(device), logprob.to(device)
            token = torch.where(finished, pad_id, token)
            tokens.append(token)
            logprobs.append(torch.where(finished, 0.0, logprob))
            finished |= torch.isin(token, stop_ids)
            if bool(finished.all()):
                break
            step_ids = token[:, None]  # [B, 1]
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones(batch, 1)], 1)
            position_ids = position_ids[:, -1:] + 1

        sampled = torch.stack(tokens, 1).cpu()  # [B, T]
        sampled_logprobs = torch.stack(logprobs, 1).cpu()  # [B, T]
        out = []
        stop_set = set(self.stop_ids)
        for row in range(batch):
            ids = sampled[row].tolist()
            keep = len(ids)
            for j, tok in enumerate(ids):
                if tok in stop_set:
                    keep = j + 1
                    break
            ids = ids[:keep]
            text_ids = [t for t in ids if t not in stop_set]
            out.append(Generation(
                token_ids=ids,
                logprobs=sampled_logprobs[row, :keep].tolist(),
                text=self.tokenizer.decode(text_ids, skip_special_tokens=False),
                allowed_ids=row_allowed[row][:keep] if tries and tries[row] else None,
            ))
        return out


def _sample(logits: Tensor, temperature: float,
            generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Sample one token per row of ``logits [B, V]``; returns ids and their log-probs ``[B]``."""
    if temperature == 0:
        logp = torch.log_softmax(logits, -1)
        token = logp.argmax(-1)
    else:
        logp = torch.log_softmax(logits / temperature, -1)
        token = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return token, logp.gather(-1, token[:, None]).squeeze(-1)
