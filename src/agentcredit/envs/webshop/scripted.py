"""The WebShop planner of the scripted policies (``rollout.scripted``), re-planning from the page
the episode is on (read from the snapshot) toward the expert's target (``expert``: the query,
the result page and the product worth 1, its options): on the search page search the query; on
results of another query go back to search, else page toward the target's page and open it;
on another product go back; on the target choose each option not yet chosen, then buy; on a
section page go back. Wrong actions: every other admissible action, with the search box's
template replaced by a search for the goal's product type alone.

The planner is privileged, as the expert is: it knows the target product; ``solver.py`` counts
its steps as the credit check's solver truth."""

from __future__ import annotations

import random

from agentcredit.envs.base import Observation, StepInfo, Task
from agentcredit.envs.webshop.engine import SEARCH_TEMPLATE, task_goal, task_shop
from agentcredit.envs.webshop.expert import expert_actions
from agentcredit.envs.webshop.snapshot import ASIN, PAGE, QUERY, RESULTS_PAGE, SELECTED


class WebShopPlanner:
    """See the module notes."""

    def __init__(self, env, task: Task):
        self.env, self.goal, shop = env, task_goal(task), task_shop(task)
        plan = expert_actions(self.goal, shop)
        self.query = plan[0][len("search["):-1]
        self.page = 1 + plan.count("click[next >]")
        clicks = [a[len("click["):-1] for a in plan
                  if a.startswith("click[") and a != "click[next >]"]
        self.asin, self.options = clicks[0], clicks[1:-1]
        product = next(p for p in shop.catalog.products if p.asin.lower() == self.asin)
        self.groups = [product.option_group(v) for v in self.options]

    def expert(self, observation: Observation) -> str | None:
        s = self.env.snapshot()
        page = s[PAGE]
        if page == "search":
            return f"search[{self.query}]"
        if page == "results":
            if s[QUERY] != self.query:
                return "click[back to search]"
            if s[RESULTS_PAGE] != self.page:
                return "click[next >]" if s[RESULTS_PAGE] < self.page else "click[< prev]"
            return f"click[{self.asin}]"
        if page == "item":
            if s[ASIN].lower() != self.asin:
                return "click[< prev]"
            for value, group in zip(self.options, self.groups, strict=True):
                if s.get(SELECTED + group) != value:
                    return f"click[{value}]"
            return "click[buy now]"
        return None if page == "done" else "click[< prev]"

    def wrong(self, observation: Observation, expert: str | None) -> list[str]:
        wrong = f"search[{self.goal.query}]"
        actions = [wrong if a == SEARCH_TEMPLATE else a for a in observation.admissible_actions]
        return [a for a in actions if a != expert]

    def observe(self, action: str, observation: Observation, info: StepInfo) -> None:
        """The planner reads the environment's snapshot, so it keeps nothing."""


def start(env, task: Task, rng: random.Random) -> tuple[WebShopPlanner, Observation]:
    """``rollout.scripted.PlannerStart`` of WebShop."""
    obs = env.reset(task)
    return WebShopPlanner(env, task), obs
