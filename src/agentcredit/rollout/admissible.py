"""Admissible-action decoding: a token trie over the state's admissible commands.

With ``rollout.decoding=admissible`` the policy may only write one of the
admissible commands of its state. Each command is tokenised exactly as an SFT
target is (``format_action`` then the end-of-turn token), the token sequences
form a trie, and at every response position the sampling distribution is
renormalised over the children of the node the response has reached:

    p̃(y_j | x, y_<j) = p(y_j | x, y_<j) / Σ_{v ∈ C(y_<j)} p(v | x, y_<j),   y_j ∈ C(y_<j)

where ``C(y_<j)`` is the set of tokens that continue some admissible command.
The recorded log-prob is ``log p̃``. The sets ``C`` of every response token are
stored with the step (``Step.allowed_ids``, plain lists of ids) and every later
pass that scores the tokens (PPO's old and new log-probs, the KL reference, the
ADRS teacher, the probes, SFT) renormalises over the same sets, so the sampled
and rescored log-probs are of one distribution. This departs from the papers,
whose agents write free text and pay the invalid-action penalty; it is the
embedded default's setting, and ``rollout.decoding=free`` restores theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from agentcredit.rollout.actions import ActionFormat, format_action

Decoding = Literal["free", "admissible"]
DECODINGS: tuple[str, ...] = ("free", "admissible")


class ActionTrie:
    """The token sequences of a state's admissible commands, as a trie.

    Args:
        sequences: one token-id sequence per command, each ending with the
            end-of-turn id (so a command that is a prefix of another still ends
            where it should).
    """

    def __init__(self, sequences: Sequence[Sequence[int]]):
        if not sequences:
            raise ValueError("an ActionTrie needs at least one command; a state with no "
                             "admissible action cannot use rollout.decoding=admissible")
        self.root: dict[int, dict] = {}
        for sequence in sequences:
            node = self.root
            for token in sequence:
                node = node.setdefault(int(token), {})
        self.depth = max(len(s) for s in sequences)

    @classmethod
    def from_commands(cls, tokenizer, commands: Sequence[str],
                      action_format: ActionFormat) -> ActionTrie:
        """The trie of ``commands`` as ``tokenizer`` writes them in ``action_format``."""
        eos = tokenizer.eos_token_id
        # one batched call: a state's commands are tokenised together, not one call each
        encoded = tokenizer([format_action(c, action_format) for c in commands],
                            add_special_tokens=False)["input_ids"]
        return cls([ids + [eos] for ids in encoded])

    def allowed_after(self, prefix: Sequence[int]) -> list[int]:
        """``C(prefix)``: the sorted ids that continue some command after ``prefix``.

        Empty when ``prefix`` is a whole command (it ended with the end-of-turn
        id) or leaves the trie.
        """
        node = self.root
        for token in prefix:
            node = node.get(int(token))
            if node is None:
                return []
        return sorted(node)

    def allowed_along(self, response_ids: Sequence[int]) -> list[list[int]]:
        """``C(y_<j)`` for every token ``j`` of a response written in the trie."""
        out, node = [], self.root
        for token in response_ids:
            out.append(sorted(node))
            node = node.get(int(token), {})
        return out


def pack_sets(sets: Sequence[Sequence[int]]) -> Tensor:
    """Pack one allowed set per row into ``[N, K]`` int64, padded with −1 (an empty set
    leaves its row unrestricted in ``restrict_logits``)."""
    out = torch.full((len(sets), max((len(a) for a in sets), default=1) or 1), -1,
                     dtype=torch.long)
    for row, allowed in enumerate(sets):
        out[row, :len(allowed)] = torch.tensor(allowed, dtype=torch.long)
    return out


def allowed_tensor(rows: Sequence[Sequence[Sequence[int]] | None],
                   offsets: Sequence[int], length: int) -> Tensor:
    """Pack per-token allowed sets into ``[S, L, K]`` int64, padded with −1.

    Row ``s``'s sets land at columns ``offsets[s], offsets[s] + 1, …`` (its
    response tokens); every other entry is −1, which scoring reads as "not
    restricted". ``K`` is the largest set (at least 1). ``None`` rows are
    unrestricted.
    """
    width = max((len(c) for r in rows if r for c in r), default=1)
    out = torch.full((len(rows), length, width), -1, dtype=torch.long)
    for s, (sets, offset) in enumerate(zip(rows, offsets, strict=True)):
        for j, allowed in enumerate(sets or ()):
            out[s, offset + j, :len(allowed)] = torch.tensor(allowed, dtype=torch.long)
    return out


def restrict_logits(logits: Tensor, allowed: Tensor) -> Tensor:
    """Set to −inf every logit outside its row's allowed set.

    Args:
        logits: ``[N, V]``.
        allowed: ``[N, K]`` ids, −1 padded; a row of all −1 is left unrestricted.

    Returns:
        ``[N, V]``, the same dtype; differentiable in ``logits``.
    """
    vocab = logits.shape[-1]
    allowed = allowed.to(logits.device)
    restricted = (allowed >= 0).any(-1, keepdim=True)  # [N, 1]
    keep = torch.zeros(logits.shape[0], vocab + 1, dtype=torch.bool, device=logits.device)
    keep.scatter_(1, torch.where(allowed >= 0, allowed, vocab), True)
    keep = keep[:, :vocab] | ~restricted
    return logits.masked_fill(~keep, -torch.inf)
