"""The WebShop state snapshot ``Φ`` (docs/vict.md §4.1) and the original verifier ``V`` over it.

A snapshot is a flat mapping (key: value):

- ``page``: ``search`` · ``results`` · ``item`` · ``description`` · ``features`` ·
  ``reviews`` · ``done``.
- ``query``: the last search query ("" before any).
- ``results_page``: the results page number (1-based; 0 before any search).
- ``product:asin``: the selected product: the last one opened ("" before any).
- ``product:title``, ``product:query``, ``product:product_category``,
  ``product:attributes``, ``product:bullet_points``, ``product:description``,
  ``product:price``: that product's reward-relevant fields (present when a product is
  selected).
- ``selected:<option name>``: the option value chosen on that product.
- ``purchased``: whether ``buy now`` was clicked.

``V(state)`` is the reward of the selected product with the selected options
once ``purchased``, else 0. Carrying the product's fields in the state (rather
than its asin alone) is what lets the mutations edit a price or drop an
attribute and have ``V`` see it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentcredit.envs.webshop.catalog import Product
from agentcredit.envs.webshop.reward import GoalSpec, Purchase, reward

PAGE, QUERY, RESULTS_PAGE, PURCHASED = "page", "query", "results_page", "purchased"
ASIN = "product:asin"
TITLE = "product:title"
PRODUCT_QUERY = "product:query"
CATEGORY_PATH = "product:product_category"
ATTRIBUTES = "product:attributes"
BULLETS = "product:bullet_points"
DESCRIPTION = "product:description"
PRICE = "product:price"
SELECTED = "selected:"


def product_fields(product: Product | None) -> dict[str, Any]:
    """The ``product:*`` entries for ``product`` (only the asin, empty, when None)."""
    if product is None:
        return {ASIN: ""}
    return {ASIN: product.asin, TITLE: product.title, PRODUCT_QUERY: product.query,
            CATEGORY_PATH: product.product_category, ATTRIBUTES: product.attributes,
            BULLETS: product.bullet_points, DESCRIPTION: product.description,
            PRICE: product.price}


def selected_values(state: Mapping[str, Any]) -> tuple[str, ...]:
    """The chosen option values, ordered by option name."""
    return tuple(state[k] for k in sorted(state) if k.startswith(SELECTED))


def purchase_of(state: Mapping[str, Any]) -> Purchase | None:
    """The selected product of ``state`` as the reward sees it, or None when there is none."""
    if not state.get(ASIN):
        return None
    return Purchase(title=state[TITLE], query=state[PRODUCT_QUERY],
                    product_category=state[CATEGORY_PATH],
                    attributes=tuple(state[ATTRIBUTES]), bullet_points=tuple(state[BULLETS]),
                    description=state[DESCRIPTION], price=float(state[PRICE]),
                    selected=selected_values(state))


def original_score(goal: GoalSpec, state: Mapping[str, Any]) -> float:
    """``V``: WebShop's reward of the purchase recorded in ``state`` (0 before ``buy now``)."""
    purchase = purchase_of(state)
    if not state.get(PURCHASED) or purchase is None:
        return 0.0
    return reward(purchase, goal).total
