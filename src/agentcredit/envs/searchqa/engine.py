"""The search QA environment: Search-R1's protocol (``protocol.py``) over a retriever.

One step is one response of the agent (a turn). Its last complete block decides:

- ``<search> q </search>``: the top ``topk`` passages for ``q`` come back inside
  ``<information>``; an empty query, or one longer than ``max_query_chars``, is
  answered with a message instead (invalid, state unchanged). A retriever that fails
  (``RetrievalError``: the server is down, times out, answers garbage; the server
  client has already retried with back-off) is answered with ``Search failed: ...``;
  the step is valid, since the agent did nothing wrong, and retrieves nothing.
- ``<answer> a </answer>``: the episode ends with reward ``EM(a)`` (``answers.py``).
- neither: Search-R1's correction message (invalid).

Every step costs a turn; after ``max_turns`` (Search-R1: 4) the episode ends
unanswered with reward 0. The step that ends an episode reports ``exact_match`` and
token ``f1`` in ``StepInfo.metrics`` (the trainer logs ``rollout/env/f1`` and
``eval/<split>/env/f1``). Action text that is not valid UTF-8 (lone surrogates) is
read with those characters replaced, so nothing the agent writes can make a later
tokenizer call fail; an action that is not text is invalid. Nothing raises.

Suggested actions (``admissible_actions``): Search-R1's action space is free text, so
every well-formed response is valid. For agents that pick from a list (the embedded
model's admissible decoding), a generated world suggests a search for each entity the
question names and each entity the last search's passages link to, and an answer
for each answerable span of every passage shown so far; a real corpus (no links, no
spans) suggests the two templates.

Snapshot ``Φ`` (docs/vict.md §4.1): ``queries`` (every query searched), ``retrieved``
(ids of every passage shown, in order), ``answered``, ``answer``. The turn count is not
state: an invalid response uses a turn but, as the protocol requires (``envs.base``),
leaves the snapshot unchanged.
"""

from __future__ import annotations

from typing import Any

from agentcredit.envs.base import Observation, StepInfo, Task
from agentcredit.envs.searchqa.answers import exact_match, token_f1
from agentcredit.envs.searchqa.corpus import Passage
from agentcredit.envs.searchqa.expert import expert_actions
from agentcredit.envs.searchqa.protocol import (
    CORRECTION,
    INSTRUCTION,
    answer_action,
    information,
    parse_response,
    search_action,
)
from agentcredit.envs.searchqa.questions import Question
from agentcredit.envs.searchqa.retrieval import RetrievalError, Retriever
from agentcredit.envs.searchqa.sources import open_retriever
from agentcredit.envs.searchqa.verifier import ANSWER, ANSWERED, build_verifier

MAX_TURNS = 4
TOPK = 3
MAX_QUERY_CHARS = 1000
TEMPLATES = (search_action("your query"), answer_action("your answer"))
QUERIES, RETRIEVED = "queries", "retrieved"


def task_question(task: Task) -> Question:
    """The question (with golden answers and hops) a search QA task carries."""
    try:
        return Question.from_json(task.payload["question"])
    except (KeyError, TypeError) as err:
        raise ValueError(f"task {task.task_id!r} is not a searchqa task: its payload needs "
                         f"'question', 'corpus' and 'retrieval' entries ({err})") from err


def clean_text(text: str) -> str:
    """``text`` with every character UTF-8 cannot encode (lone surrogates) replaced by ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8")


class SearchQAEnv:
    """Search QA through the agentcredit protocol (``envs.base.Environment``).

    Args:
        max_turns: responses per episode.
        topk: passages per search.
        max_query_chars: longer queries are refused.
        retriever: use this retriever for every task instead of the one its payload names
            (tests, benchmarks).
        answer_scope: what ``<answer>`` commits in the verifier: ``all`` atoms or only the
            ``decided`` one (``envs.searchqa.verifier``).
    """

    name = "searchqa"

    def __init__(self, max_turns: int = MAX_TURNS, topk: int = TOPK,
                 max_query_chars: int = MAX_QUERY_CHARS, retriever: Retriever | None = None,
                 answer_scope: str = "all"):
        if max_turns < 1 or topk < 1 or max_query_chars < 1:
            raise ValueError(f"SearchQAEnv: max_turns={max_turns}, topk={topk} and "
                             f"max_query_chars={max_query_chars} must all be >= 1")
        self.max_turns, self.topk, self.max_query_chars = max_turns, topk, max_query_chars
        self._fixed_retriever = retriever
        self.answer_scope = answer_scope
        self._task: Task | None = None

    # EPISODE STATE

    def reset(self, task: Task) -> Observation:
        self._task, self._question = task, task_question(task)
        self._retriever = self._fixed_retriever or open_retriever(task.payload["corpus"],
                                                                  task.payload["retrieval"])
        self._turn, self._queries, self._retrieved = 0, (), ()
        self._last: tuple[Passage, ...] = ()
        self._shown: tuple[tuple[Passage, ...], ...] = ()  # each search's passages
        self._answer: str | None = None
        self._done = False
        return self._observation(INSTRUCTION.format(question=self._question.text))

    def _require_reset(self) -> None:
        if self._task is None:
            raise RuntimeError("call reset(task) before stepping the searchqa environment")

    def snapshot(self) -> dict[str, Any]:
        self._require_reset()
        return {QUERIES: self._queries, RETRIEVED: self._retrieved,
                ANSWERED: self._answer is not None, ANSWER: self._answer or ""}

    @property
    def exact_match(self) -> float:
        """EM of the answer given so far (0 before any)."""
        return exact_match(self._answer, self._question.answers)

    @property
    def f1(self) -> float:
        """Token F1 of the answer given so far (0 before any): a metric, not the reward."""
        return token_f1(self._answer, self._question.answers)

    def admissible_actions(self) -> tuple[str, ...]:
        self._require_reset()
        if self._done:
            return ()
        searches = [*self._question.topics, *(t for p in self._last for t in p.links)]
        answers = [s for shown in reversed(self._shown) for p in shown for s in p.spans]
        if not searches and not answers:
            return TEMPLATES
        return tuple(dict.fromkeys([*map(search_action, searches), *map(answer_action, answers)]))

    def _observation(self, text: str) -> Observation:
        return Observation(text, self.admissible_actions())

    # STEPS

    def step(self, action_text: str) -> tuple[Observation, float, bool, StepInfo]:
        self._require_reset()
        if self._done:
            return self._observation("The episode is over."), 0.0, True, StepInfo(False, self._won)
        self._turn += 1
        text, valid = self._apply(action_text)
        if self._turn >= self.max_turns:
            self._done = True
        reward = self.exact_match if self._answer is not None else 0.0
        metrics = {"exact_match": reward, "f1": self.f1} if self._done else {}
        return self._observation(text), reward, self._done, StepInfo(valid, self._won, metrics)

    @property
    def _won(self) -> bool:
        return self._answer is not None and self.exact_match == 1.0

    def _apply(self, action_text: Any) -> tuple[str, bool]:
        """Perform the action; returns the observation text and whether it was valid."""
        if not isinstance(action_text, str):
            return CORRECTION, False
        action = parse_response(clean_text(action_text))
        if action.kind == "answer":
            self._answer, self._done = action.content, True
            return "Answer submitted.", True
        if action.kind is None:
            return CORRECTION, False
        return self._search(action.content)

    def _search(self, query: str) -> tuple[str, bool]:
        if not query:
            return ("My previous search query is empty. I should put a query between "
                    "<search> and </search>. Let me try again."), False
        if len(query) > self.max_query_chars:
            return (f"My previous search query is longer than {self.max_query_chars} "
                    "characters. I should search with a shorter query. Let me try again."), False
        self._queries += (query,)
        try:
            passages = tuple(self._retriever.search(query, self.topk))
        except RetrievalError as err:
            self._last = ()
            return f"<information>Search failed: {err}</information>", True
        self._last, self._shown = passages, (*self._shown, passages)
        self._retrieved += tuple(p.doc_id for p in passages)
        if not passages:
            return "<information>No passage matches the query.</information>", True
        return information(passages), True

    # ORACLES

    def verifier(self, task: Task):
        return build_verifier(task, task_question(task), self.answer_scope)

    def expert(self, task: Task) -> list[str]:
        return expert_actions(task_question(task))
