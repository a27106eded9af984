"""Search-R1's own response format through the real collector: ``rollout.action_format=raw``
hands the whole multi-line response to the environment, which finds its block."""

from __future__ import annotations

import pytest
import torch

from agentcredit.envs.base import Task
from agentcredit.envs.searchqa.corpus import Passage
from agentcredit.envs.searchqa.engine import SearchQAEnv
from agentcredit.envs.searchqa.questions import Hop, Question
from agentcredit.envs.searchqa.retrieval import BM25Retriever
from agentcredit.rollout.actions import FORMAT_INSTRUCTIONS
from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.rollout.prompts import PromptConfig

PASSAGES = [Passage("0", "Velmor", "Velmor is a city in Arvenia. It was founded in 1401."),
            Passage("1", "Arvenia", "Arvenia is a country in Asia."),
            Passage("2", "Sostia", "Sostia is a country in Europe.")]

# what a Search-R1 model writes: free reasoning over several lines, then one block
SEARCH = ("<think>\nThe question asks for the country of Velmor.\n"
          "I do not know it, so I look Velmor up.\n</think>\n<search> Velmor </search>\n")
ANSWER = ("<think>\nDoc 1 says Velmor is a city in Arvenia.\n</think>\n"
          "<answer> Arvenia </answer>")


def _task() -> Task:
    question = Question("In which country is Velmor?", ("Arvenia",), "single_hop",
                        (Hop("Velmor", "0", "Arvenia"),), ("Velmor",))
    return Task("searchqa-test-00000", "searchqa", "test", question.text, "single_hop",
                {"corpus": {}, "retrieval": {}, "question": question.to_json()})


class ScriptedPolicy:
    """Answers the one rollout's steps with ``responses``, in order; keeps the prompts."""

    def __init__(self, tokenizer, responses):
        self.tokenizer, self.responses, self.prompts = tokenizer, list(responses), []

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None):
        (prompt,) = prompts
        self.prompts.append(self.tokenizer.decode(prompt))
        text = self.responses.pop(0)
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [
            self.tokenizer.eos_token_id]
        return [Generation(ids, [0.0] * len(ids), text)]


def _rollout(tokenizer, action_format):
    policy = ScriptedPolicy(tokenizer, [SEARCH, ANSWER])
    config = CollectorConfig(max_steps=4, outcome_reward=1.0, invalid_penalty=-0.01,
                             prompt=PromptConfig(action_format=action_format))
    collector = RolloutCollector(policy, lambda: SearchQAEnv(retriever=BM25Retriever(PASSAGES)),
                                 config)
    (traj,) = collector.collect([_task()], 1, temperature=1.0, generator=torch.Generator())
    return traj, policy


def test_a_multi_line_search_r1_response_is_a_valid_raw_action_that_searches_then_answers(
        fake_tokenizer):
    traj, policy = _rollout(fake_tokenizer, "raw")
    assert [s.action for s in traj.steps] == [SEARCH.strip(), ANSWER.strip()]
    assert [s.valid for s in traj.steps] == [True, True]
    # the search ran: the answer step saw Velmor's passage first
    assert traj.steps[1].observation.startswith("<information>Doc 1(Title: Velmor) Velmor is")
    assert traj.steps[1].snapshot["queries"] == ("Velmor",)
    assert traj.won and not traj.truncated
    assert [s.reward for s in traj.steps] == [0.0, 1.0]  # no penalty; outcome 1 · EM
    assert FORMAT_INSTRUCTIONS["raw"] in policy.prompts[0]


@pytest.mark.parametrize("action_format", ["bare", "tagged"])
def test_the_line_and_tag_formats_still_count_the_same_response_invalid(fake_tokenizer,
                                                                         action_format):
    # the environment still searches and answers the raw text, but the collector charges
    # the penalty: bare needs one line, tagged an <action> block
    traj, _ = _rollout(fake_tokenizer, action_format)
    assert [s.action for s in traj.steps] == [None, None]
    assert [s.valid for s in traj.steps] == [False, False]
    assert traj.won and [s.reward for s in traj.steps] == [-0.01, -0.01 + 1.0]
