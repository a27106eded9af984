"""Exact match after Search-R1's normalisation, and token F1 (hand-worked examples)."""

import pytest

from agentcredit.envs.searchqa.answers import exact_match, normalize_answer, token_f1


@pytest.mark.parametrize(("text", "normal"), [
    ("The Eiffel Tower", "eiffel tower"),
    ("  an   Apple, a day!  ", "apple day"),
    ("U.S.A.", "usa"),
    ("Theatre of the Absurd", "theatre of absurd"),  # "the" only as a whole word
    ("A-ha", "aha"),
    ("", ""),
])
def test_normalisation_lowercases_drops_punctuation_and_articles_and_collapses_space(text,
                                                                                   normal):
    assert normalize_answer(text) == normal


def test_exact_match_accepts_any_golden_answer_after_normalisation():
    golden = ["Republic of Arvenia", "Arvenia"]
    assert exact_match("arvenia.", golden) == 1.0
    assert exact_match("the Republic of Arvenia", golden) == 1.0
    assert exact_match("Arvenia City", golden) == 0.0
    assert exact_match("Arvenia is the answer", golden) == 0.0


def test_no_answer_scores_zero_even_against_an_empty_golden_answer():
    assert exact_match(None, [""]) == 0.0
    assert exact_match("", ["the"]) == 1.0  # both normalise to the empty string


def test_token_f1_is_the_best_harmonic_mean_of_token_precision_and_recall():
    # "velmor city council" vs "velmor city": 2 shared, p = 2/3, r = 1 -> f1 = 0.8
    assert token_f1("Velmor City Council", ["Velmor City"]) == pytest.approx(0.8)
    # against two golden answers the better one counts: "velmor" alone gives p = 1/3, r = 1
    assert token_f1("Velmor City Council", ["Velmor", "Velmor City"]) == pytest.approx(0.8)
    assert token_f1("Brimeam", ["Velmor"]) == 0.0
    assert token_f1(None, ["Velmor"]) == 0.0


def test_f1_gives_yes_and_no_no_partial_credit():
    assert token_f1("yes", ["yes"]) == 1.0
    assert token_f1("no", ["no way"]) == 0.0  # would be 2/3 without HotpotQA's rule
