"""The search QA solver's ``d(s)`` on a corridor of three hops, where each search by a title shows
that one passage: ``d`` = hops not yet shown + 1, lost episodes at the cap."""

from __future__ import annotations

import pytest

from agentcredit.envs.base import ReplayMismatch, Task
from agentcredit.envs.searchqa.corpus import Passage
from agentcredit.envs.searchqa.engine import SearchQAEnv
from agentcredit.envs.searchqa.protocol import answer_action, search_action
from agentcredit.envs.searchqa.questions import Hop, Question
from agentcredit.envs.searchqa.retrieval import BM25Retriever
from agentcredit.envs.searchqa.solver import distance_to_answer
from agentcredit.train.evaluation.credit_check.truths import SolverTruth, solver_for

from ...played import played

PASSAGES = [Passage("0", "Velmor", "Velmor is a city in Arvenia."),
            Passage("1", "Arvenia", "Arvenia is a country. Its capital is Dostak."),
            Passage("2", "Dostak", "Dostak was founded in 1401."),
            Passage("3", "Sostia", "Sostia is a country in Europe.")]
CAP = 10
QUESTION = Question("In what year was the capital of the country of Velmor founded?",
                    ("1401",), "composition",
                    (Hop("Velmor", "0", "Arvenia"), Hop("Arvenia", "1", "Dostak", (0,)),
                     Hop("Dostak", "2", "1401", (1,))), ("Velmor",))
TASK = Task("searchqa-test-00000", "searchqa", "test", QUESTION.text, "composition",
            {"corpus": {}, "retrieval": {}, "question": QUESTION.to_json()})
VELMOR, ARVENIA, DOSTAK = (search_action(t) for t in ("Velmor", "Arvenia", "Dostak"))
SOSTIA = search_action("Sostia")


def corridor_env(max_turns: int = 8, topk: int = 1) -> SearchQAEnv:
    return SearchQAEnv(max_turns=max_turns, topk=topk, retriever=BM25Retriever(PASSAGES))


def d(prefix: list[str], max_turns: int = 8, topk: int = 1, task: Task = TASK) -> int:
    """``d`` after ``prefix``, its replay checked against a first play of it."""
    recorded = played(corridor_env(max_turns, topk), task, prefix)
    after = [s.observation for s in recorded.steps[1:]] + [recorded.final_observation]
    return distance_to_answer(corridor_env(max_turns, topk), task, prefix, CAP, None, after)


@pytest.mark.parametrize("prefix, distance", [
    ([], 4),                            # three searches and the answer
    ([VELMOR], 3),
    ([VELMOR, SOSTIA], 3),              # a search that shows no hop gains nothing
    ([VELMOR, VELMOR], 3),              # nor does showing a hop twice
    ([DOSTAK], 3),                      # a hop shown out of order still counts
    ([VELMOR, ARVENIA, DOSTAK], 1),     # only the answer is left
    ([VELMOR, ARVENIA, DOSTAK, answer_action("1401")], 0),
])
def test_d_counts_the_hops_not_yet_shown_plus_the_answer(prefix, distance):
    assert d(prefix) == distance


def test_a_search_that_shows_two_hops_reveals_both():
    # top 2: the Dostak search also lists Arvenia, whose passage names Dostak
    assert d([DOSTAK], topk=2) == 2
    # the solver's own searches too: hops (Dostak, Arvenia) take one search, not two
    pair = Question("Which is older?", ("Dostak",), "comparison",
                    (Hop("Dostak", "2", "1401"), Hop("Arvenia", "1", "Dostak")), ("Dostak",))
    task = Task("searchqa-test-00001", "searchqa", "test", pair.text, "comparison",
                {"corpus": {}, "retrieval": {}, "question": pair.to_json()})
    assert d([], topk=2, task=task) == 2
    assert d([], topk=1, task=task) == 3


def test_a_wrong_answer_ends_the_episode_lost_at_the_cap():
    assert d([VELMOR, answer_action("Arvenia")]) == CAP
    assert d([answer_action("1401")]) == 0  # a right answer wins, searched or not


def test_a_plan_the_remaining_turns_cannot_hold_is_lost():
    # four turns: after one wasted search the three searches and the answer no longer fit
    assert d([], max_turns=4) == 4
    assert d([SOSTIA], max_turns=4) == CAP
    assert d([SOSTIA, SOSTIA, SOSTIA, SOSTIA], max_turns=4) == CAP  # the episode is over


def test_d_is_capped():
    assert distance_to_answer(corridor_env(), TASK, [], 2) == 2


def test_a_replay_that_differs_from_the_record_is_refused():
    with pytest.raises(ReplayMismatch, match="does not replay identically"):
        distance_to_answer(corridor_env(), TASK, [VELMOR], CAP, None, ["<information>"])


def test_a_question_without_hops_has_no_solver():
    bare = Question("Who?", ("Ann",), "nq", (), ())
    task = Task("nq-0", "searchqa", "test", "Who?", "nq",
                {"corpus": {}, "retrieval": {}, "question": bare.to_json()})
    with pytest.raises(ValueError, match="--truths mc"):
        distance_to_answer(corridor_env(), task, [], CAP)


def test_solver_truth_regrets_on_a_scripted_rollout():
    # d: 4, 4 (Sostia shows no hop), 3, 3 (invalid: no tag), 2 (Dostak out of order), 1, 0
    traj = played(corridor_env(), TASK, [SOSTIA, VELMOR, "I am not sure.", DOSTAK, ARVENIA,
                                         answer_action("1401")])
    assert traj.won and [s.valid for s in traj.steps] == [True, True, False, True, True, True]
    truth = SolverTruth(corridor_env, solver_for("searchqa"), cap=CAP, tie_breaks=2)
    assert truth.estimate([traj]).values.tolist() == [-1.0, 0.0, -1.0, 0.0, 0.0, 0.0]


def test_solver_truth_scores_a_wrong_answer_as_a_fall_to_the_cap():
    # d: 4, 3, then the wrong answer ends the episode lost: d = CAP
    traj = played(corridor_env(), TASK, [VELMOR, answer_action("Arvenia")])
    truth = SolverTruth(corridor_env, solver_for("searchqa"), cap=CAP, tie_breaks=0)
    assert truth.estimate([traj]).values.tolist() == [0.0, 3.0 - CAP - 1.0]
