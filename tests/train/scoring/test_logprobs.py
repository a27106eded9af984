"""Log-probs and entropies from logits (train/scoring/logprobs.py), and the scoring pass over plain
rows: aligned with the tokens, independent of the branch batch, zero off the scored tokens."""

from __future__ import annotations

import pytest
import torch

from agentcredit.train.model_loading import load_policy
from agentcredit.train.prefix_tree import row_trees
from agentcredit.train.scoring import logprobs as logprobs_module
from agentcredit.train.scoring.logprobs import logprob_entropy_rows
from agentcredit.train.scoring.tree_forward import Rows, score_trees


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return load_policy(str(tiny_model_dir))


def _right_padded_rows(vocab: int, lengths: list[int], pad_id: int, seed: int = 0) -> Rows:
    """Random rows, every token after the first scored."""
    gen = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), pad_id)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(3, vocab, (n,), generator=gen)
        mask[row, :n] = 1
    scored = mask.bool().clone()
    scored[:, 0] = False
    return Rows(ids, mask, scored)


def _score(model, rows: Rows, branch_batch: int) -> torch.Tensor:
    return score_trees(model, row_trees(torch.arange(rows.input_ids.shape[0]),
                                        rows.attention_mask), rows, branch_batch=branch_batch)


def test_the_scores_do_not_depend_on_the_branch_batch(policy):
    model, tokenizer = policy
    rows = _right_padded_rows(len(tokenizer), [7, 12, 3, 12, 9], tokenizer.pad_token_id)
    whole = _score(model, rows, 5)
    for size in (1, 2, 3):
        torch.testing.assert_close(_score(model, rows, size), whole, atol=1e-5, rtol=1e-5)


def test_an_entry_is_the_log_softmax_of_the_column_before_it_at_its_token(policy):
    model, tokenizer = policy
    rows = _right_padded_rows(len(tokenizer), [10, 6], tokenizer.pad_token_id)
    scored = _score(model, rows, 2)
    with torch.no_grad():
        log_probs = torch.log_softmax(model(input_ids=rows.input_ids).logits.float(), dim=-1)
    assert (scored[:, 0] == 0).all() and (scored[1, 6:] == 0).all()
    for row, length in enumerate((10, 6)):
        for pos in range(1, length):
            manual = log_probs[row, pos - 1, rows.input_ids[row, pos]]
            torch.testing.assert_close(scored[row, pos], manual, atol=1e-5, rtol=1e-5)


def test_scoring_some_tokens_gives_them_their_full_scores_and_zero_elsewhere(policy):
    model, tokenizer = policy
    rows = _right_padded_rows(len(tokenizer), [9, 12, 5], tokenizer.pad_token_id)
    wanted = torch.zeros_like(rows.loss_mask)
    wanted[0, 6:9] = True
    wanted[1, 2:4] = True  # row 2 wants nothing
    full = _score(model, rows, 3)
    part = _score(model, Rows(rows.input_ids, rows.attention_mask, wanted), 2)
    torch.testing.assert_close(part[wanted], full[wanted], atol=1e-5, rtol=0)
    assert (part[~wanted] == 0).all()


def test_scoring_takes_no_gradient(policy):
    model, tokenizer = policy
    rows = _right_padded_rows(len(tokenizer), [5, 4], tokenizer.pad_token_id)
    assert not _score(model, rows, 2).requires_grad


def test_statistics_are_those_of_the_tempered_renormalised_softmax(monkeypatch):
    """Hand-made logits: the log-prob and the entropy of ``softmax(z / T)`` over each row's
    allowed ids (all ids where the row allows all), whatever the chunk size."""
    logits = torch.tensor([[2.0, 0.0, -1.0, 1.0], [0.5, 0.5, 3.0, -2.0], [1.0, 2.0, 3.0, 4.0]])
    targets = torch.tensor([3, 0, 2])
    allowed = torch.tensor([[0, 3], [-1, -1], [2, -1]])
    temperature = 0.5
    expected_lp, expected_ent = [], []
    for z, y, ids in zip(logits, targets, allowed, strict=True):
        keep = ids[ids >= 0] if bool((ids >= 0).any()) else torch.arange(4)
        p = {int(v): float(torch.exp(z[v] / temperature)) for v in keep}
        total = sum(p.values())
        expected_lp.append(float(torch.log(torch.tensor(p[int(y)] / total))))
        expected_ent.append(-sum(q / total * float(torch.log(torch.tensor(q / total)))
                                 for q in p.values()))
    for chunk in (2**25, 4):  # all rows at once; one row per chunk
        monkeypatch.setattr(logprobs_module, "_LOGIT_ELEMENTS_PER_CHUNK", chunk)
        lp, ent = logprob_entropy_rows(logits, targets, True, allowed, temperature)
        torch.testing.assert_close(lp, torch.tensor(expected_lp), atol=1e-6, rtol=0)
        torch.testing.assert_close(ent, torch.tensor(expected_ent), atol=1e-6, rtol=0)
    # the last row's only allowed id is certain
    assert float(lp[2]) == 0.0 and float(ent[2]) == 0.0


def test_a_temperature_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="temperature=0"):
        logprob_entropy_rows(torch.zeros(1, 3), torch.zeros(1, dtype=torch.long), False,
                             temperature=0)
