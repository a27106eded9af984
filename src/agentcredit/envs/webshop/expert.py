"""The WebShop expert for SFT: search with the goal's key terms, page to a product that
fully satisfies the goal, open it, choose each requested option, buy.

The expert is privileged: it scores the results with the reward to find a
product worth 1 (the goal's own target is one). When the key-term search does
not list such a product in its 50 results, it searches the target's title
instead. Plans never exceed 10 steps (search, 4 × next, open, <= 3 options, buy).
"""

from __future__ import annotations

from collections.abc import Sequence

from agentcredit.envs.webshop.catalog import Product
from agentcredit.envs.webshop.goals import Goal
from agentcredit.envs.webshop.pages import RESULTS_PER_PAGE
from agentcredit.envs.webshop.reward import Purchase, option_matched, reward
from agentcredit.envs.webshop.shop import Shop


def key_terms(goal: Goal) -> str:
    """The expert's first query: the product type and the requested attributes."""
    return " ".join([goal.query, *goal.attributes])


def choose_options(product: Product, goal: Goal) -> list[str]:
    """For each requested option, the first value of ``product`` that matches it."""
    chosen: list[str] = []
    groups_used: set[str] = set()
    for wanted in goal.goal_options:
        for name, values in product.options:
            if name in groups_used:
                continue
            value = next((v for v in values if option_matched(wanted, [v])), None)
            if value is not None:
                chosen.append(value)
                groups_used.add(name)
                break
    return chosen


def purchase_score(product: Product, goal: Goal, options: Sequence[str]) -> float:
    """The reward of buying ``product`` with ``options`` chosen."""
    purchase = Purchase(title=product.title, query=product.query,
                        product_category=product.product_category,
                        attributes=product.attributes, bullet_points=product.bullet_points,
                        description=product.description, price=product.price,
                        selected=tuple(options))
    return reward(purchase, goal.spec()).total


def _plan(query: str, hits: Sequence[int], products: Sequence[Product],
          goal: Goal) -> list[str] | None:
    for rank, i in enumerate(hits):
        product = products[i]
        options = choose_options(product, goal)
        if purchase_score(product, goal, options) == 1.0:
            return ([f"search[{query}]"] + ["click[next >]"] * (rank // RESULTS_PER_PAGE)
                    + [f"click[{product.asin.lower()}]"] + [f"click[{v}]" for v in options]
                    + ["click[buy now]"])
    return None


def expert_actions(goal: Goal, shop: Shop) -> list[str]:
    """The expert's action sequence for ``goal`` (see the module notes)."""
    products = shop.catalog.products
    for query in (key_terms(goal), goal.name):
        plan = _plan(query, shop.search(query), products, goal)
        if plan is not None:
            return plan
    raise RuntimeError(f"the expert finds no product worth 1 for goal {goal.asin} "
                       f"({goal.instruction_text!r}) in the results of its two searches")
