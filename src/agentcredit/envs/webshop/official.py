"""Tasks from WebShop's own files (the 1,000- or 1.18M-product releases).

The product and attribute files load through ``official_catalog.py``, as the
catalog spec ``{"kind": "official", ...}`` that every environment shares. This
module reads the third file and builds the tasks:

- **human goals** (``items_human_ins.json``): ``{asin: [{"instruction": ...,
  "instruction_attributes": [...], "instruction_options": [...] | {name: value}},
  ...]}``. As WebShop's goal builder does, a goal without attributes is
  skipped, and the instruction (trailing periods stripped) gets the price
  clause of its bound; bounds are drawn by ``goals.price_upper_for`` from a
  seeded stream, so they are reproducible but not WebShop's own draws.
"""

from __future__ import annotations

import random
from pathlib import Path

from agentcredit.envs.base import Task
from agentcredit.envs.webshop.catalog import Catalog, Product
from agentcredit.envs.webshop.goals import Goal, price_upper_for, split_goals
from agentcredit.envs.webshop.official_catalog import WebShopFileError, read_json
from agentcredit.envs.webshop.reward import NO_PRICE_BOUND, option_matched
from agentcredit.envs.webshop.shop import open_shop
from agentcredit.envs.webshop.tasks import SPLITS, goal_tasks


def _option_name(product: Product, value: str) -> str:
    for name, values in product.options:
        if any(option_matched(value, [v]) for v in values):
            return name
    return ""


def load_human_goals(catalog: Catalog, goals_path: str | Path, seed: int = 0) -> list[Goal]:
    """Goals from WebShop's human instruction file, for the products ``catalog`` holds."""
    data = read_json(goals_path, "goals")
    if not isinstance(data, dict):
        raise WebShopFileError(f"WebShop goals file {goals_path} must map asins to lists of "
                               "instructions")
    rng, goals = random.Random(seed), []
    for asin in sorted(data):
        product = catalog.get(asin)
        if product is None:
            continue
        entries = data[asin] if isinstance(data[asin], list) else [data[asin]]
        for entry in entries:
            attributes = tuple(str(a) for a in entry.get("instruction_attributes") or ())
            if not attributes:
                continue
            raw = entry.get("instruction_options") or ()
            values = tuple(str(v) for v in (raw.values() if isinstance(raw, dict) else raw))
            upper = price_upper_for(product.price, rng)
            text = str(entry.get("instruction", "")).strip().strip(".")
            if upper is not None:
                text += f", and price lower than {upper:.2f} dollars"
            goals.append(Goal(
                asin=product.asin, category=product.category, query=product.query,
                name=product.title, product_category=product.product_category,
                instruction_text=text, attributes=attributes, goal_options=values,
                option_names=tuple(_option_name(product, v) for v in values),
                price_upper=NO_PRICE_BOUND if upper is None else upper))
    if not goals:
        raise WebShopFileError(f"no usable goals in {goals_path} for the {len(catalog)} "
                               "products loaded")
    return goals


def official_tasks(split: str, products_path: str | Path, goals_path: str | Path,
                   attributes_path: str | Path | None = None, valid_goals: int = 1000,
                   test_goals: int = 500, seed: int = 0) -> list[Task]:
    """Tasks of ``split`` from WebShop's files (WebShop's own split sizes by default)."""
    if split not in SPLITS:
        raise ValueError(f"unknown WebShop split {split!r}; expected one of {SPLITS}")
    spec = {"kind": "official", "products": str(Path(products_path).resolve()),
            "attributes": str(Path(attributes_path).resolve()) if attributes_path else None}
    goals = load_human_goals(open_shop(spec).catalog, goals_path, seed)
    splits = split_goals(goals, valid_goals, test_goals, seed)
    return goal_tasks(splits[split], split, spec, prefix="webshop-official")
