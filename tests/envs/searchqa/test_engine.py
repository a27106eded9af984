"""The search QA environment: turns, observations, rewards, bad input, retriever failures."""

import pytest

from agentcredit.envs.base import Environment, Task
from agentcredit.envs.searchqa.corpus import Passage
from agentcredit.envs.searchqa.engine import SearchQAEnv, task_question
from agentcredit.envs.searchqa.protocol import CORRECTION, INSTRUCTION, last_answer
from agentcredit.envs.searchqa.questions import Hop, Question
from agentcredit.envs.searchqa.retrieval import BM25Retriever, RetrievalError

PASSAGES = [Passage("0", "Velmor", "Velmor is a city in Arvenia. It was founded in 1401."),
            Passage("1", "Arvenia", "Arvenia is a country in Asia. Its capital is Beijing."),
            Passage("2", "Brimeam", "Brimeam is a city in Sostia."),
            Passage("3", "Sostia", "Sostia is a country in Europe.")]


def _task(answers=("Arvenia",), qtype="single_hop") -> Task:
    question = Question("In which country is Velmor?", answers, qtype,
                        (Hop("Velmor", "0", "Arvenia"),), ("Velmor",))
    return Task("searchqa-test-00000", "searchqa", "test", question.text, qtype,
                {"corpus": {}, "retrieval": {}, "question": question.to_json()})


@pytest.fixture
def small_env():
    return SearchQAEnv(retriever=BM25Retriever(PASSAGES))


class Failing:
    def __init__(self):
        self.calls = 0

    def search(self, query, k):
        self.calls += 1
        raise RetrievalError("the retrieval server did not answer (timed out)")


def test_searchqa_env_speaks_the_environment_protocol():
    assert isinstance(SearchQAEnv(), Environment) and SearchQAEnv.name == "searchqa"


def test_reset_shows_the_instruction_with_the_question_and_suggests_its_entity(small_env):
    obs = small_env.reset(_task())
    assert obs.text == INSTRUCTION.format(question="In which country is Velmor?")
    assert obs.admissible_actions == ("<search> Velmor </search>",)
    assert small_env.snapshot() == {"queries": (), "retrieved": (), "answered": False,
                                    "answer": ""}


def test_a_search_returns_the_top_three_passages_in_an_information_block(small_env):
    small_env.reset(_task())
    obs, reward, done, info = small_env.step("Look it up. <search> Velmor city country </search>")
    assert obs.text.startswith("<information>Doc 1(Title: Velmor) Velmor is a city in Arvenia.")
    assert obs.text.count("\nDoc ") == 2 and obs.text.endswith("</information>")
    assert (reward, done, info.valid, info.won) == (0.0, False, True, False)
    assert small_env.snapshot()["queries"] == ("Velmor city country",)
    assert small_env.snapshot()["retrieved"][0] == "0"
    assert len(small_env.snapshot()["retrieved"]) == 3  # all four passages match


def test_a_correct_answer_ends_the_episode_with_reward_one(small_env):
    small_env.reset(_task())
    _, reward, done, info = small_env.step("It is <answer> the republic: ARVENIA </answer>")
    assert (reward, done, info.valid, info.won) == (0.0, True, True, False)  # not an alias
    small_env.reset(_task(("Arvenia", "Republic of Arvenia")))
    _, reward, done, info = small_env.step("<answer> the republic of ARVENIA! </answer>")
    assert (reward, done, info.valid, info.won) == (1.0, True, True, True)
    assert info.metrics == {"exact_match": 1.0, "f1": 1.0}


def test_the_ending_step_reports_token_f1_as_a_metric(small_env):
    small_env.reset(_task(("Velmor City",)))
    _, _, _, info = small_env.step("<search> Velmor </search>")
    assert info.metrics == {}
    _, reward, done, info = small_env.step("<answer> Velmor </answer>")
    # "velmor" vs "velmor city": p = 1, r = 1/2 -> F1 = 2/3; EM 0
    assert done and reward == 0.0 and info.metrics == {"exact_match": 0.0, "f1": 2 / 3}


def test_the_episode_ends_unanswered_after_four_turns(small_env):
    small_env.reset(_task())
    for turn in range(1, 5):
        obs, reward, done, info = small_env.step("<search> Velmor </search>")
        assert done == (turn == 4) and reward == 0.0
    assert obs.admissible_actions == ()
    obs, reward, done, info = small_env.step("<answer> Arvenia </answer>")
    assert (reward, done, info.valid) == (0.0, True, False)


def test_a_response_without_a_block_gets_the_correction_and_costs_a_turn(small_env):
    small_env.reset(_task())
    before = small_env.snapshot()
    for turn in range(1, 5):
        obs, _, done, info = small_env.step("I think the answer is Arvenia.")
        assert obs.text == CORRECTION and not info.valid and done == (turn == 4)
        assert small_env.snapshot() == before


def test_the_prompt_example_answer_never_scores(small_env):
    """The trap: the instruction shows ``<answer> Beijing </answer>``; a scorer reading the
    whole transcript's last answer would give an agent that never answers EM 1 here."""
    task = _task(("Beijing",))
    obs = small_env.reset(task)
    assert last_answer(obs.text) == "Beijing"  # the trap is set
    for _ in range(4):
        obs, reward, done, info = small_env.step("<search> Arvenia capital </search>")
    assert done and reward == 0.0 and not info.won
    small_env.reset(task)
    obs, reward, done, info = small_env.step(
        "The example says <answer> Beijing </answer>, but mine is <answer> Velmor </answer>")
    assert done and reward == 0.0 and small_env.snapshot()["answer"] == "Velmor"


@pytest.mark.parametrize(("action", "message"), [
    ("<search>   </search>", "My previous search query is empty."),
    ("<search> " + "velmor " * 1500 + "</search>", "longer than 1000 characters"),
    ("<search> unclosed", "My previous action is invalid."),
    (b"<search> Velmor </search>", "My previous action is invalid."),
])
def test_bad_input_is_answered_invalid_without_an_exception(small_env, action, message):
    small_env.reset(_task())
    before = small_env.snapshot()
    obs, _, done, info = small_env.step(action)
    assert message in obs.text and not info.valid and not done
    assert small_env.snapshot() == before


def test_text_that_is_not_utf8_is_searched_with_the_bad_characters_replaced(small_env):
    small_env.reset(_task())
    obs, _, done, info = small_env.step("<search> Velmor \udcff\ud800 </search>")
    assert info.valid and "Doc 1(Title: Velmor)" in obs.text
    assert small_env.snapshot()["queries"] == ("Velmor ??",)
    obs.text.encode("utf-8")
    _, _, done, _ = small_env.step("<answer> Arvenia\udcff </answer>")
    assert done and small_env.snapshot()["answer"] == "Arvenia?"


def test_a_failing_retriever_becomes_an_observation_and_the_rollout_goes_on():
    failing = Failing()
    env = SearchQAEnv(retriever=failing)
    env.reset(_task())
    obs, reward, done, info = env.step("<search> Velmor </search>")
    assert obs.text == ("<information>Search failed: the retrieval server did not answer "
                        "(timed out)</information>")
    assert info.valid and not done and failing.calls == 1
    obs, reward, done, info = env.step("<answer> Arvenia </answer>")
    assert done and reward == 1.0


def test_a_query_nothing_matches_returns_an_empty_information_block(small_env):
    small_env.reset(_task())
    obs, *_ = small_env.step("<search> zzz qqq </search>")
    assert obs.text == "<information>No passage matches the query.</information>"


def test_generated_tasks_suggest_answers_from_every_passage_shown(env, test_tasks):
    task = next(t for t in test_tasks if t.task_type == "comparison")
    question = task_question(task)
    env.reset(task)
    for hop in question.hops:
        obs, *_ = env.step(f"<search> {hop.title} </search>")
    names = [h.title.split(" (")[0] for h in question.hops]
    assert all(f"<answer> {n} </answer>" in obs.admissible_actions for n in names)


def test_runs_are_deterministic(env, test_tasks):
    def run():
        out = []
        for task in test_tasks[:10]:
            obs = env.reset(task)
            for _ in range(3):
                obs, reward, done, _ = env.step(obs.admissible_actions[-1])
                out.append((obs.text, reward))
                if done:
                    break
        return out

    assert run() == run()
