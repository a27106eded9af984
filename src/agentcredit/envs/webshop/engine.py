"""The WebShop environment: WebShop's page flow and action space over a catalog.

Pages and the actions each admits (WebShop's ``text`` environment):

- search: ``search[<query>]`` (listed as ``search[<your query>]``).
- results: ``click[back to search]``, ``click[< prev]`` (page > 1), ``click[next >]``
  (more pages), ``click[<asin>]`` for the 10 products shown.
- item: ``click[back to search]``, ``click[< prev]`` (to the results),
  ``click[<option value>]``, ``click[description]``, ``click[features]``,
  ``click[reviews]``, ``click[buy now]``.
- description / features / reviews: ``click[back to search]``, ``click[< prev]`` (to the
  item).
- done: none: the episode is over.

A search shows up to 50 results, 10 per page. Opening a product clears the
option choices; choosing a value of a group replaces that group's earlier
choice. ``buy now`` ends the episode with WebShop's reward of the product and
options (``reward.py``); so does the step limit (15, docs/settings.md §6), with reward 0.

A bad action (unparsable, unknown asin, an option the product does not offer,
a label not on the page, an empty query, more than ``max_action_chars``
characters) leaves the state unchanged, counts as a step, comes back with
``valid=False`` and an observation that says what was wrong, and never raises.
"""

from __future__ import annotations

import re
from typing import Any

from agentcredit.envs.base import Observation, StepInfo, Task
from agentcredit.envs.webshop import pages
from agentcredit.envs.webshop.actions import parse_action
from agentcredit.envs.webshop.catalog import Product
from agentcredit.envs.webshop.expert import expert_actions
from agentcredit.envs.webshop.goals import Goal
from agentcredit.envs.webshop.pages import RESULTS_PER_PAGE, SECTIONS
from agentcredit.envs.webshop.shop import Shop, open_shop
from agentcredit.envs.webshop.snapshot import (
    PAGE,
    PURCHASED,
    QUERY,
    RESULTS_PAGE,
    SELECTED,
    original_score,
    product_fields,
)
from agentcredit.envs.webshop.verifier import build_verifier

MAX_STEPS = 15
MAX_ACTION_CHARS = 1000
SEARCH_TEMPLATE = "search[<your query>]"
_ASIN_LIKE = re.compile(r"b0[a-z0-9]{8}")


def task_goal(task: Task) -> Goal:
    """The goal a WebShop task carries in its payload."""
    try:
        return Goal.from_json(task.payload["goal"])
    except (KeyError, TypeError) as err:
        raise ValueError(f"task {task.task_id!r} is not a WebShop task: its payload needs "
                         f"'goal' and 'catalog' entries ({err})") from err


def task_shop(task: Task) -> Shop:
    """The catalog and search index a WebShop task is set in."""
    if "catalog" not in task.payload:
        raise ValueError(f"task {task.task_id!r} has no payload['catalog'] spec")
    return open_shop(task.payload["catalog"])


class WebShopEnv:
    """WebShop through the agentcredit protocol (``envs.base.Environment``).

    Args:
        max_steps: steps (valid or not) after which the episode ends unbought.
        max_action_chars: longer actions are invalid.
    """

    name = "webshop"

    def __init__(self, max_steps: int = MAX_STEPS, max_action_chars: int = MAX_ACTION_CHARS):
        if max_steps < 1:
            raise ValueError(f"max_steps={max_steps}; expected >= 1")
        self.max_steps = max_steps
        self.max_action_chars = max_action_chars
        self._task: Task | None = None

    # EPISODE STATE

    def reset(self, task: Task) -> Observation:
        self._task, self._goal, self._shop = task, task_goal(task), task_shop(task)
        self._page, self._query, self._results_page = "search", "", 0
        self._results: tuple[int, ...] = ()
        self._product: Product | None = None
        self._selected: dict[str, str] = {}
        self._purchased, self._score, self._steps, self._done = False, 0.0, 0, False
        return self._observation(self._page_text())

    def _require_reset(self) -> None:
        if self._task is None:
            raise RuntimeError("call reset(task) before stepping the WebShop environment")

    def snapshot(self) -> dict[str, Any]:
        self._require_reset()
        state = {PAGE: self._page, QUERY: self._query, RESULTS_PAGE: self._results_page,
                 PURCHASED: self._purchased, **product_fields(self._product)}
        state.update({SELECTED + n: v for n, v in self._selected.items()})
        return state

    # PAGES

    def _shown(self) -> list[Product]:
        start = (self._results_page - 1) * RESULTS_PER_PAGE
        products = self._shop.catalog.products
        return [products[i] for i in self._results[start:start + RESULTS_PER_PAGE]]

    def _page_text(self) -> str:
        instruction = self._goal.instruction_text
        if self._page == "search":
            return pages.search_page(instruction)
        if self._page == "results":
            return pages.results_page(instruction, self._shown(), self._results_page,
                                      len(self._results))
        if self._page == "item":
            return pages.item_page(instruction, self._product, self._selected)
        if self._page in SECTIONS:
            return pages.section_page(instruction, self._product, self._page)
        return pages.done_page(self._product, self._selected, self._score)

    def admissible_actions(self) -> tuple[str, ...]:
        self._require_reset()
        if self._done:
            return ()
        if self._page == "search":
            return (SEARCH_TEMPLATE,)
        if self._page == "results":
            actions = ["click[back to search]"]
            if self._results_page > 1:
                actions.append("click[< prev]")
            if self._results_page * RESULTS_PER_PAGE < len(self._results):
                actions.append("click[next >]")
            return tuple(actions + [f"click[{p.asin.lower()}]" for p in self._shown()])
        if self._page == "item":
            return ("click[back to search]", "click[< prev]",
                    *(f"click[{v}]" for v in self._product.option_values),
                    *(f"click[{s}]" for s in SECTIONS), "click[buy now]")
        return ("click[back to search]", "click[< prev]")

    def _observation(self, text: str) -> Observation:
        return Observation(text, self.admissible_actions())

    # STEPS

    def step(self, action_text: str) -> tuple[Observation, float, bool, StepInfo]:
        self._require_reset()
        if self._done:
            return self._invalid("the episode is over")
        self._steps += 1
        error = self._apply(action_text)
        if self._steps >= self.max_steps and not self._done:
            self._done = True
        if error is not None:
            return self._invalid(error)
        won = self._purchased and self._score == 1.0
        return self._observation(self._page_text()), self._score, self._done, StepInfo(True, won)

    def _invalid(self, reason: str) -> tuple[Observation, float, bool, StepInfo]:
        text = f"Invalid action: {reason}.{pages.SEP}{self._page_text()}"
        won = self._purchased and self._score == 1.0
        return self._observation(text), self._score, self._done, StepInfo(False, won)

    def _apply(self, action_text: Any) -> str | None:
        """Perform the action; returns why it is invalid, or None when it was performed."""
        if not isinstance(action_text, str):
            return "an action is text such as search[...] or click[...]"
        if len(action_text) > self.max_action_chars:
            return f"the action is longer than {self.max_action_chars} characters"
        parsed = parse_action(action_text)
        if parsed is None:
            return "expected search[<query>] or click[<button>]"
        verb, arg = parsed
        return self._search(arg) if verb == "search" else self._click(arg)

    def _search(self, query: str) -> str | None:
        if self._page != "search":
            return "there is no search box on this page; click[back to search] first"
        if not query:
            return "the search query is empty"
        self._query, self._results = query, self._shop.search(query)
        self._page, self._results_page = "results", 1
        return None

    def _click(self, label: str) -> str | None:
        page = self._page
        if label == "back to search" and page != "search":
            self._page = "search"
            return None
        if page == "results":
            return self._click_results(label)
        if page == "item":
            return self._click_item(label)
        if page in SECTIONS and label == "< prev":
            self._page = "item"
            return None
        return self._not_clickable(label)

    def _click_results(self, label: str) -> str | None:
        if label == "next >" and self._results_page * RESULTS_PER_PAGE < len(self._results):
            self._results_page += 1
            return None
        if label == "< prev" and self._results_page > 1:
            self._results_page -= 1
            return None
        for product in self._shown():
            if product.asin.lower() == label:
                self._product, self._selected, self._page = product, {}, "item"
                return None
        return self._not_clickable(label)

    def _click_item(self, label: str) -> str | None:
        if label == "< prev":
            self._page = "results" if self._results else "search"
            return None
        if label in SECTIONS:
            self._page = label
            return None
        if label == "buy now":
            self._purchased, self._page, self._done = True, "done", True
            self._score = original_score(self._goal.spec(), self.snapshot())
            return None
        group = self._product.option_group(label)
        if group is not None:
            self._selected[group] = label
            return None
        return self._not_clickable(label)

    def _not_clickable(self, label: str) -> str:
        shown = label if len(label) <= 60 else label[:57] + "..."
        if _ASIN_LIKE.fullmatch(label):
            return f"product {shown} is not listed on this page"
        if self._page == "item" and label in self._shop.catalog.option_values:
            return f"{shown!r} is not an option of this product"
        return f"{shown!r} is not clickable on this page"

    # ORACLES

    def verifier(self, task: Task):
        return build_verifier(task, task_goal(task), task_shop(task))

    def expert(self, task: Task) -> list[str]:
        return expert_actions(task_goal(task), task_shop(task))
