"""The Search-R1 protocol: the last block decides, the information block, the messages."""

import time

from agentcredit.envs.searchqa.corpus import Passage
from agentcredit.envs.searchqa.protocol import (
    CORRECTION,
    Action,
    information,
    last_answer,
    parse_response,
    shown_titles,
)


def test_free_reasoning_before_a_search_block_is_allowed():
    assert parse_response("I need the director.\n<search> The Golden Empire </search>") \
        == Action("search", "The Golden Empire")


def test_the_last_complete_block_is_the_action():
    text = "<search> a </search> then <answer> Velmor </answer>"
    assert parse_response(text) == Action("answer", "Velmor")
    assert parse_response("<answer> x </answer> no, <search> b </search>") == Action("search", "b")


def test_malformed_tags_are_not_actions():
    for text in ("<search> unclosed", "<search> q </answer>", "<SEARCH> q </SEARCH>",
                 "search: q", "</answer> a <answer>", ""):
        assert parse_response(text) == Action(None), text


def test_last_answer_reads_the_last_of_several_answers():
    assert last_answer("<answer> Beijing </answer> ... <answer>  Velmor </answer>") == "Velmor"
    assert last_answer("<search> x </search>") is None


def test_information_lists_passages_as_search_r1_writes_them():
    docs = [Passage("7", "Velmor (film)", "Velmor is a 1999 film."), Passage("9", "B", "b text")]
    text = information(docs)
    assert text == ("<information>Doc 1(Title: Velmor (film)) Velmor is a 1999 film.\n"
                    "Doc 2(Title: B) b text</information>")
    assert shown_titles(text) == ("Velmor (film)", "B")


def test_the_correction_message_is_search_r1s():
    assert CORRECTION.startswith("My previous action is invalid.")
    assert CORRECTION.endswith("Let me try again.")


def test_a_block_opens_at_the_nearest_opening_tag_of_its_kind():
    assert parse_response("<search> a <search> b </search>") == Action("search", "b")
    assert parse_response("<answer> x </answer> and <search> y") == Action("answer", "x")


def test_parsing_ten_thousand_unclosed_tags_takes_no_time():
    start = time.perf_counter()
    for text in ("<search>" * 12_500, "<answer> a" * 10_000, "</search><search>" * 5_000):
        parse_response(text)
        last_answer(text)
    assert time.perf_counter() - start < 1.0  # a backtracking regex takes about 15 s each
