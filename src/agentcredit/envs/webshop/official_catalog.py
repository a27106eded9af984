"""Load WebShop's own product and attribute files (the 1,000- or 1.18M-product releases).

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

``shop.open_shop`` loads a ``{"kind": "official", ...}`` catalog spec through
``load_products``; the goal file and the tasks built on these files are
``official.py``'s.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agentcredit.envs.webshop.catalog import Catalog, Product

DEFAULT_PRICE = 100.0


class WebShopFileError(ValueError):
    """A WebShop data file is missing, unreadable or not in WebShop's schema."""


def read_json(path: str | Path, what: str) -> Any:
    """The JSON in ``path``; a missing or malformed file raises ``WebShopFileError``
    naming the ``what`` file (``products``, ``attributes``, ``goals``)."""
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
    records = read_json(products_path, "products")
    if not isinstance(records, list):
        raise WebShopFileError(f"WebShop products file {products_path} must hold a JSON list of "
                               f"product records, not {type(records).__name__}")
    attributes = read_json(attributes_path, "attributes") if attributes_path else {}
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
