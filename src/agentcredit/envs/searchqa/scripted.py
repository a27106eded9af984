"""The Search-QA planner of the scripted policies (``rollout.scripted``): the solver's plan from
what the episode showed (``solver.distance_to_answer``): search the first hop whose passage no
search has listed yet, by its title; once every hop is shown, answer the golden answer. Wrong
actions: the environment's other suggested searches and answers."""

from __future__ import annotations

import random

from agentcredit.envs.base import Observation, StepInfo, Task
from agentcredit.envs.searchqa.engine import task_question
from agentcredit.envs.searchqa.protocol import answer_action, search_action, shown_titles


class SearchQAPlanner:
    """See the module notes."""

    def __init__(self, task: Task):
        self.question = task_question(task)
        self.shown: set[str] = set()

    def expert(self, observation: Observation) -> str | None:
        for hop in self.question.hops:
            if hop.title not in self.shown:
                return search_action(hop.title)
        return answer_action(self.question.answers[0])

    def wrong(self, observation: Observation, expert: str | None) -> list[str]:
        return [a for a in observation.admissible_actions if a != expert]

    def observe(self, action: str, observation: Observation, info: StepInfo) -> None:
        self.shown.update(shown_titles(observation.text))


def start(env, task: Task, rng: random.Random) -> tuple[SearchQAPlanner, Observation]:
    """``rollout.scripted.PlannerStart`` of Search-QA."""
    return SearchQAPlanner(task), env.reset(task)
