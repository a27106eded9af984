"""The checks credit's records run on their tensors (credit/tensor_checks.py): one message form
for a tensor of the wrong kind, a non-finite entry and a tensor on another device, the same in
each record that checks one (``HindsightScores``, ``TokenScores``, ``CreditResult``)."""

from __future__ import annotations

import pytest
import torch

from agentcredit.credit.hindsight import HindsightScores, check_hindsight_scores
from agentcredit.credit.result import CreditResult
from agentcredit.credit.tensor_checks import check_finite, check_float_vector, check_on_device
from agentcredit.credit.tokens import TokenScores, check_token_scores

STEPS = torch.tensor([0, 0, 1])  # three valid tokens, two steps
FINE = torch.tensor([-1.0, -2.0, -3.0])


@pytest.mark.parametrize(("value", "got"), [
    (torch.zeros(2, 3), "dtype torch.float32 shape (2, 3)"),
    (torch.tensor([1, 2, 3]), "dtype torch.int64 shape (3,)"),
    (torch.zeros(4), "dtype torch.float32 shape (4,)"),  # one entry too many
    ([0.0, 0.0, 0.0], "list"),
])
def test_a_vector_of_the_wrong_kind_or_length_names_the_field_what_it_got_and_the_fix(value, got):
    with pytest.raises(ValueError) as err:
        check_float_vector(value, "Record.field", "with one score per token (3)", length=3,
                           fix="Score every token.")
    assert str(err.value) == (f"Record.field must be a 1-D float tensor with one score per token "
                              f"(3); got {got}. Score every token.")


def test_a_vector_of_any_length_passes_when_no_length_is_asked():
    check_float_vector(torch.zeros(7, dtype=torch.float64), "Record.field", "[S]")


def test_the_first_entry_that_is_not_finite_is_named():
    with pytest.raises(ValueError, match=r"^Record.field\[1\] = inf is not finite; fix it\.$"):
        check_finite(torch.tensor([0.0, float("inf"), float("nan")]), "Record.field", "fix it")


def test_a_tensor_on_another_device_is_named_with_the_batchs_device():
    with pytest.raises(ValueError) as err:
        check_on_device(torch.empty(2, device="meta"), "Record.field", torch.device("cpu"))
    assert str(err.value) == ("Record.field is on meta but the batch is on cpu; move it with "
                              ".to(device).")


# THE THREE RECORDS SPEAK THROUGH THEM


def test_hindsight_scores_of_the_wrong_length_name_the_field_and_the_step_count():
    scores = HindsightScores(hindsight=torch.zeros(3), behaviour=torch.zeros(2))
    with pytest.raises(ValueError) as err:
        check_hindsight_scores(scores, 2, torch.device("cpu"))
    assert str(err.value) == ("CreditBatch.hindsight.hindsight must be a 1-D float tensor with "
                              "one mean log-prob per step (2); got dtype torch.float32 shape "
                              "(3,).")


def test_a_non_finite_hindsight_mean_says_to_average_real_tokens_only():
    scores = HindsightScores(hindsight=torch.zeros(2), behaviour=torch.tensor([0.0, float("nan")]))
    with pytest.raises(ValueError) as err:
        check_hindsight_scores(scores, 2, torch.device("cpu"))
    assert str(err.value) == ("CreditBatch.hindsight.behaviour[1] = nan is not finite; average "
                              "only real response tokens.")


def test_token_scores_of_integers_name_the_field_and_the_token_count():
    tokens = TokenScores(token_step=STEPS, teacher_logprobs=FINE,
                         behaviour_logprobs=torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError) as err:
        check_token_scores(tokens, 2, torch.device("cpu"))
    assert str(err.value) == ("CreditBatch.tokens.behaviour_logprobs must be a 1-D float tensor "
                              "with one log-prob per valid token (3); got dtype torch.int64 "
                              "shape (3,).")


def test_a_non_finite_token_score_says_to_score_real_tokens_only():
    tokens = TokenScores(token_step=STEPS, teacher_logprobs=torch.tensor([0.0, 0.0, -torch.inf]))
    with pytest.raises(ValueError) as err:
        check_token_scores(tokens, 2, torch.device("cpu"))
    assert str(err.value) == ("CreditBatch.tokens.teacher_logprobs[2] = -inf is not finite; "
                              "score only real response tokens, never padding.")


def test_token_scores_on_another_device_name_the_field():
    tokens = TokenScores(token_step=STEPS.to("meta"), teacher_logprobs=FINE)
    with pytest.raises(ValueError, match=r"^CreditBatch.tokens.token_step is on meta but the "
                                         r"batch is on cpu"):
        check_token_scores(tokens, 2, torch.device("cpu"))


def test_step_advantages_of_two_dimensions_say_to_return_one_per_step():
    with pytest.raises(ValueError) as err:
        CreditResult(step_advantages=torch.zeros(2, 1))
    assert str(err.value) == ("CreditResult.step_advantages must be a 1-D float tensor [S]; got "
                              "dtype torch.float32 shape (2, 1). Return one advantage per step "
                              "of the batch.")
