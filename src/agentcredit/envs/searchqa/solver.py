"""The search QA solver truth's ``d(s)`` (docs/credit_check.md §2.1): the steps the expert still
needs once it knows what the prefix showed.

A hop counts as revealed once a search's ``<information>`` listed its passage (its title, as
the verifier's ``hop:<k>`` atoms read it). From the replayed state the solver searches each
hop not yet revealed by its title, in hop order (skipping any hop one of its own searches
revealed on the way), then answers the canonical golden answer:

    d(s) = (hops not yet revealed) + 1

capped at ``cap``. It never answers before every hop is revealed: the answer is what the
passages tell, and a solver that answered blind would know more than the prefix showed.
The plan is played in the environment, so its turn limit binds: a plan the remaining turns
cannot hold is lost. A lost episode (a wrong answer, which ends it, or the turn limit) is
``cap``, as a dead end is on ALFWorld; a won one is 0. The solver is deterministic: it has no
ties to break, so ``rng`` is unused. FlashRAG questions carry no hops, so they have no solver.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from agentcredit.envs.base import Task, replayed
from agentcredit.envs.searchqa.engine import task_question
from agentcredit.envs.searchqa.options import SearchQAConfig
from agentcredit.envs.searchqa.protocol import answer_action, search_action, shown_titles


def solver_refusal(config: SearchQAConfig) -> str | None:
    """Why questions under ``config`` have no solver truth (FlashRAG questions carry no hops),
    or ``None``."""
    if config.data_dir:
        return (f"env.searchqa.data_dir = {config.data_dir!r} holds FlashRAG questions, which "
                "carry no supporting passages, so they have no solver truth")
    return None


def distance_to_answer(env, task: Task, prefix: Sequence[str], cap: int,
                       rng: random.Random | None = None,
                       observations: Sequence[str] | None = None) -> int:
    """Steps the expert needs to answer ``task`` from the state ``prefix`` leads to, knowing
    only the passages the prefix showed (module notes;
    ``train.evaluation.credit_check.truths.DistanceFn``).

    Raises:
        ReplayMismatch: ``observations`` (the text after each prefix action, as recorded) differ
            from what the replay shows.
        ValueError: the question has no supporting passages (a FlashRAG question).
    """
    question = task_question(task)
    if not question.hops:
        raise ValueError(f"task {task.task_id!r} has no supporting passages (a FlashRAG "
                         "question), so it has no solver truth; use the Monte Carlo truth "
                         "(--truths mc)")
    shown: set[str] = set()
    for _, obs, done, info in replayed(env, task, prefix, observations):
        if done:
            return 0 if info.won else cap
        shown.update(shown_titles(obs.text))
    steps = 0
    for hop in question.hops:
        if hop.title in shown:
            continue
        obs, _, _, _ = env.step(search_action(hop.title))
        steps += 1
        shown.update(shown_titles(obs.text))
    # past the turn limit the environment answers "The episode is over.", not won
    _, _, _, info = env.step(answer_action(question.answers[0]))
    return min(steps + 1, cap) if info.won else cap
