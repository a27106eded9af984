"""token_logprobs: aligned with the tokens, independent of micro-batching and padding."""

from __future__ import annotations

import pytest
import torch

from agentcredit.train.model_loading import load_policy
from agentcredit.train.scoring.logprobs import token_logprobs, token_logprobs_and_entropy


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return load_policy(str(tiny_model_dir))


def _right_padded_batch(vocab: int, lengths: list[int], pad_id: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad_id)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(3, vocab, (n,), generator=gen)
        mask[row, :n] = 1
    return ids, mask


def test_micro_batched_logprobs_equal_single_batch(policy):
    model, tokenizer = policy
    ids, mask = _right_padded_batch(len(tokenizer), [7, 12, 3, 12, 9], tokenizer.pad_token_id)
    whole = token_logprobs(model, ids, mask, micro_batch_size=5)
    for mbs in (1, 2, 3):
        torch.testing.assert_close(
            token_logprobs(model, ids, mask, micro_batch_size=mbs), whole, atol=1e-5, rtol=1e-5
        )


def test_logprob_entry_equals_manual_log_softmax_gather(policy):
    model, tokenizer = policy
    ids, mask = _right_padded_batch(len(tokenizer), [10, 10], tokenizer.pad_token_id)
    scored = token_logprobs(model, ids, mask, micro_batch_size=2)
    with torch.no_grad():
        log_probs = torch.log_softmax(model(input_ids=ids).logits.float(), dim=-1)
    for row in range(2):
        assert scored[row, 0] == 0
        for pos in range(1, 10):
            manual = log_probs[row, pos - 1, ids[row, pos]]
            torch.testing.assert_close(scored[row, pos], manual, atol=1e-5, rtol=1e-5)


def test_padding_does_not_change_scores_and_padded_entries_are_zero(policy):
    model, tokenizer = policy
    pad = tokenizer.pad_token_id
    seq = torch.randint(3, len(tokenizer), (8,), generator=torch.Generator().manual_seed(1))
    alone = token_logprobs(model, seq[None], torch.ones(1, 8, dtype=torch.long), 1)[0]

    right = torch.cat([seq, torch.full((4,), pad)])
    left = torch.cat([torch.full((4,), pad), seq])
    ids = torch.stack([right, left])
    mask = torch.tensor([[1] * 8 + [0] * 4, [0] * 4 + [1] * 8])
    scored = token_logprobs(model, ids, mask, micro_batch_size=2)

    assert torch.isfinite(scored).all()
    torch.testing.assert_close(scored[0, :8], alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(scored[1, 4:], alone, atol=1e-5, rtol=1e-5)
    assert (scored[0, 8:] == 0).all() and (scored[1, :5] == 0).all()


def test_entropy_matches_the_full_softmax_and_logprobs_match_token_logprobs(policy):
    model, tokenizer = policy
    ids, mask = _right_padded_batch(len(tokenizer), [6, 9], tokenizer.pad_token_id)
    logprobs, entropy = token_logprobs_and_entropy(model, ids, mask, micro_batch_size=1)
    torch.testing.assert_close(logprobs, token_logprobs(model, ids, mask, 2))
    with torch.no_grad():
        log_p = torch.log_softmax(model(input_ids=ids[1:]).logits.float(), dim=-1)[0]
    manual = -(log_p.exp() * log_p).sum(-1)  # [L], row l predicts token l+1
    torch.testing.assert_close(entropy[1, 1:], manual[:-1], atol=1e-5, rtol=1e-5)
    assert (entropy[0, 6:] == 0).all() and entropy[0, 0] == 0
    assert (entropy[:, 1:][mask[:, 1:].bool()] > 0).all()


def test_scoring_runs_without_grad_unless_asked(policy):
    model, tokenizer = policy
    ids, mask = _right_padded_batch(len(tokenizer), [5, 4], tokenizer.pad_token_id)
    assert not token_logprobs(model, ids, mask, 2).requires_grad
    with_grad = token_logprobs(model, ids, mask, 2, requires_grad=True)
    (with_grad * mask).sum().backward()
    grad = model.get_input_embeddings().weight.grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)


def test_a_score_mask_gives_the_full_scores_on_its_tokens_and_zero_elsewhere(policy):
    model, tokenizer = policy
    ids, mask = _right_padded_batch(len(tokenizer), [9, 12, 5], tokenizer.pad_token_id)
    wanted = torch.zeros_like(mask, dtype=torch.bool)
    wanted[0, 6:9] = True
    wanted[1, 2:4] = True  # row 2 wants nothing
    full, full_ent = token_logprobs_and_entropy(model, ids, mask, 3)
    part, part_ent = token_logprobs_and_entropy(model, ids, mask, 2, score_mask=wanted)
    assert torch.allclose(part[wanted], full[wanted], atol=1e-5)
    assert torch.allclose(part_ent[wanted], full_ent[wanted], atol=1e-5)
    assert (part[~wanted] == 0).all() and (part_ent[~wanted] == 0).all()
