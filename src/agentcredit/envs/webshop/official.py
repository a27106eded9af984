"""Load WebShop's own product, attribute and goal files (the 1,000- or 1.18M-product releases).

Files and the fields read:

- **products** (``items_shuffle*.json``): a JSON list of records with ``asin``,
  ``name``, ``category``, ``query``, ``product_category``, ``full_description``,
  ``small_description`` (bullet list or one string), ``pricing`` (``"$12.99"``
  or ``"$1.99 - $8.99"``), ``customization_options`` (option name -> list of
  ``{"value": ...}``) and optionally ``average_rating`` / ``Rating`` and
  ``Reviews``. As WebShop's loader does, records with an asin of ``"nan"`` or
  longer than 10 characters and repeated asins are skipped, queries and option
  names/values are lower-cased (``/`` in a value becomes `` | ``), a missing
  price is $100, and a price range gets a price drawn uniformly inside it
  (seeded by the asin here, so a reload gives the same price; WebShop draws
  from one global random stream).
- **attributes** (``items_ins_v2*.json``): ``{asin: {"attributes": [...], ...}}``;
  a product without an entry has no attributes (WebShop gives it a placeholder
  no goal can match, which scores the same).
- **human goals** (``items_human_ins.json``): ``{asin: [{"instruction": ...,
  "instruction_attributes": [...], "instruction_options": [...] | {name: value}},
  ...]}``. As WebShop's goal builder does, a goal without attributes is
  skipped, and the instruction (trailing periods stripped) gets the price
  clause of its bound; bounds are drawn by ``goals.price_upper_for`` from a
  seeded stream, so they are reproducible but not WebShop's own draws.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agentcredit.envs.base import Task
from agentcredit.envs.webshop.catalog import Catalog, Product
from agentcredit.envs.webshop.goals import Goal, price_upper_for, split_goals
from agentcredit.envs.webshop.reward import NO_PRICE_BOUND, option_matched
from agentcredit.envs.webshop.shop import open_shop
from agentcredit.envs.webshop.tasks import SPLITS, goal_tasks

DEFAULT_PRICE = 100.0


class WebShopFileError(ValueError):
    """A WebShop data file is missing, unreadable or not in WebShop's schema."""


def _read_json(path: str | Path, what: str) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as err:
        raise WebShopFileError(f"WebShop {what} file not found: {path}") from err
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise WebShopFileError(f"WebShop {what} file {path} is not valid JSON ({err})") from err


def parse_pricing(pricing: Any, asin: str) -> float:
    """The price of a product from its ``pricing`` text (see the module notes)."""
    if not pricing:
        return DEFAULT_PRICE
    if isinstance(pricing, (int, float)):
        return float(pricing)
    values = []
    for part in str(pricing).split("$")[1:]:
        digits = re.sub(r"[^\d.]", "", part)
        try:
            values.append(float(Decimal(digits)))
        except InvalidOperation:
            continue
    if not values:
        return DEFAULT_PRICE
    if len(values) == 1:
        return values[0]
    seed = int(hashlib.sha256(asin.encode()).hexdigest()[:16], 16)
    return round(random.Random(seed).uniform(values[0], values[1]), 2)


def _options(raw: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    groups = []
    for name, contents in (raw or {}).items():
        if not contents:
            continue
        values = []
        for item in contents:
            value = item.get("value") if isinstance(item, dict) else item
            if value is None:
                continue
            value = str(value).strip().replace("/", " | ").lower()
            if value and value not in values:
                values.append(value)
        if values:
            groups.append((name.lower(), tuple(values)))
    return tuple(groups)


def _reviews(raw: Any) -> tuple[str, ...]:
    texts = []
    for review in raw or ():
        if isinstance(review, dict):
            body = review.get("body") or review.get("review") or ""
            title = review.get("title") or ""
            texts.append(f"{title}: {body}".strip(": "))
        else:
            texts.append(str(review))
    return tuple(t for t in texts if t)


def load_products(products_path: str | Path,
                  attributes_path: str | Path | None = None) -> Catalog:
    """A catalog from WebShop's product file (and its attribute file, when given)."""
    records = _read_json(products_path, "products")
    if not isinstance(records, list):
        raise WebShopFileError(f"WebShop products file {products_path} must hold a JSON list of "
                               f"product records, not {type(records).__name__}")
    attributes = _read_json(attributes_path, "attributes") if attributes_path else {}
    products, seen = [], set()
    for n, record in enumerate(records):
        if not isinstance(record, dict) or "asin" not in record or "name" not in record:
            raise WebShopFileError(f"record {n} of {products_path} lacks 'asin' or 'name'; "
                                   "is this WebShop's items_shuffle file?")
        asin = str(record["asin"]).upper()
        if asin == "NAN" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        bullets = record.get("small_description") or []
        if isinstance(bullets, str):
            bullets = [bullets]
        rating = record.get("average_rating", record.get("Rating"))
        try:
            rating = None if rating in (None, "", "N.A.") else float(rating)
        except (TypeError, ValueError):
            rating = None
        attrs = attributes.get(record["asin"], attributes.get(asin, {})) or {}
        products.append(Product(
            asin=asin, category=str(record.get("category", "")).lower(),
            query=str(record.get("query", "")).lower().strip(),
            product_category=str(record.get("product_category", "")),
            title=str(record["name"]), price=parse_pricing(record.get("pricing"), asin),
            bullet_points=tuple(str(b) for b in bullets),
            description=str(record.get("full_description") or ""),
            attributes=tuple(str(a) for a in attrs.get("attributes", ())),
            options=_options(record.get("customization_options")), rating=rating,
            reviews=_reviews(record.get("Reviews"))))
    return Catalog(products, source=str(products_path))


def _option_name(product: Product, value: str) -> str:
    for name, values in product.options:
        if any(option_matched(value, [v]) for v in values):
            return name
    return ""


def load_human_goals(catalog: Catalog, goals_path: str | Path, seed: int = 0) -> list[Goal]:
    """Goals from WebShop's human instruction file, for the products ``catalog`` holds."""
    data = _read_json(goals_path, "goals")
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
