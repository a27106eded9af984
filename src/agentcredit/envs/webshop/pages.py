"""The text of WebShop's pages, in the style of its text observation mode.

Segments are joined by `` [SEP] `` as WebShop's ``text`` mode renders its HTML;
every page after the first repeats the instruction, and the clickable labels
appear where the page shows them (``Back to Search``, ``< Prev``, ``Next >``,
asins, option values, ``Description``, ``Features``, ``Reviews``, ``Buy Now``).
The clickable actions themselves are listed by the engine as
``click[<label in lower case>]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentcredit.envs.webshop.catalog import Product

SEP = " [SEP] "
RESULTS_PER_PAGE = 10
SECTIONS = ("description", "features", "reviews")


def _instruction(instruction: str) -> list[str]:
    return ["Instruction:", instruction]


def price_tag(price: float) -> str:
    return f"${price:.2f}"


def search_page(instruction: str) -> str:
    return SEP.join(["WebShop", *_instruction(instruction), "Search"])


def results_page(instruction: str, hits: Sequence[Product], page: int, total: int) -> str:
    """Page ``page`` (1-based) of ``total`` results; ``hits`` are the products on it."""
    parts = [*_instruction(instruction), "Back to Search", f"Page {page} (Total results: {total})"]
    if page > 1:
        parts.append("< Prev")
    if page * RESULTS_PER_PAGE < total:
        parts.append("Next >")
    for p in hits:
        parts += [p.asin, p.title, price_tag(p.price)]
    return SEP.join(parts)


def item_page(instruction: str, product: Product, selected: Mapping[str, str]) -> str:
    parts = [*_instruction(instruction), "Back to Search", "< Prev"]
    for name, values in product.options:
        parts += [name, *values]
    if selected:
        parts.append("Selected: " + ", ".join(f"{n}: {v}" for n, v in selected.items()))
    rating = "N.A." if product.rating is None else f"{product.rating:.1f}"
    parts += [product.title, f"Price: {price_tag(product.price)}", f"Rating: {rating}",
              "Description", "Features", "Reviews", "Buy Now"]
    return SEP.join(parts)


def section_page(instruction: str, product: Product, section: str) -> str:
    """The Description, Features or Reviews page of ``product``."""
    if section == "description":
        body = [product.description or "No description."]
    elif section == "features":
        body = list(product.bullet_points) or ["No features."]
    else:
        body = list(product.reviews) or ["No reviews yet."]
    return SEP.join([*_instruction(instruction), "Back to Search", "< Prev", *body])


def done_page(product: Product, selected: Mapping[str, str], score: float) -> str:
    options = ", ".join(f"{n}: {v}" for n, v in selected.items()) or "none"
    return SEP.join(["Thank you for shopping with us!", "Purchased", product.asin,
                     product.title, f"Options: {options}", "Your score (min 0.0, max 1.0)",
                     f"{score:.4f}"])
