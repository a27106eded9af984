"""Products in WebShop's schema, and a seeded generator of a catalog of them.

A ``Product`` carries the fields WebShop's engine keeps after loading its
product file: ``asin``, ``category``, ``query``, ``product_category``, ``Title``
(``title``), price, ``BulletPoints``, ``Description``, ``Attributes``, the
option groups (``options``: name -> values), rating and reviews.

``generate_catalog(n, seed)`` spreads ``n`` products evenly over the product
types of ``taxonomy`` and shuffles them. Products of one type are each
other's near-duplicates: same title words and query, different brands,
attribute subsets, option values and prices; products of one line (same type
and brand) differ by one attribute, and a listing that lacks its line's
attribute may point to it hyphenated (``Looking for slim-fit? ...``), which a
search matches and the reward does not. Every attribute a product has is
written into its bullet points (the Features page); one or two also go into
its title; no text of a product names an attribute it lacks.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cache, cached_property

from agentcredit.envs.webshop.reward import FUZZY_THRESHOLD, fuzzy_score, normalize_color
from agentcredit.envs.webshop.taxonomy import (
    BENEFITS,
    BRAND_SYLLABLES,
    CATEGORY_ATTRIBUTES,
    DESCRIPTIONS,
    PRODUCT_TYPES,
    REVIEWS,
    ProductType,
)

_ASIN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


@dataclass(frozen=True, slots=True)
class Product:
    """One product (WebShop's loaded product record).

    Attributes:
        asin: Amazon id (``B0...``), shown upper case, clicked lower case.
        category: WebShop category (``beauty`` ... ``electronics``).
        query: the search term the product was collected under.
        product_category: the `` › ``-separated category path.
        title: the product name.
        price: the price the agent pays.
        bullet_points: the Features page.
        description: the Description page.
        attributes: hidden attribute phrases the reward matches against.
        options: ``(name, values)`` groups, values lower case.
        rating: average rating, or None when unknown.
        reviews: review texts for the Reviews page.
        product_type: the generator's type id (empty for loaded products).
    """

    asin: str
    category: str
    query: str
    product_category: str
    title: str
    price: float
    bullet_points: tuple[str, ...]
    description: str
    attributes: tuple[str, ...]
    options: tuple[tuple[str, tuple[str, ...]], ...]
    rating: float | None = None
    reviews: tuple[str, ...] = ()
    product_type: str = ""

    def option_group(self, value: str) -> str | None:
        """The option name that offers ``value``, or None."""
        for name, values in self.options:
            if value in values:
                return name
        return None

    @property
    def option_values(self) -> tuple[str, ...]:
        return tuple(v for _, values in self.options for v in values)


class Catalog:
    """An ordered, immutable set of products with lookups by asin and by query."""

    def __init__(self, products: Iterable[Product], source: str):
        self.products: tuple[Product, ...] = tuple(products)
        self.source = source
        self.index_of: dict[str, int] = {}
        for i, p in enumerate(self.products):
            if p.asin in self.index_of:
                raise ValueError(f"catalog {source!r}: asin {p.asin} appears twice")
            self.index_of[p.asin] = i
        if not self.products:
            raise ValueError(f"catalog {source!r} has no products")

    def __len__(self) -> int:
        return len(self.products)

    def get(self, asin: str) -> Product | None:
        """The product with ``asin`` (any case), or None."""
        i = self.index_of.get(asin.upper())
        return None if i is None else self.products[i]

    @cached_property
    def by_query(self) -> dict[str, tuple[int, ...]]:
        """Product indices per ``query`` (the near-duplicate groups), in catalog order."""
        groups: dict[str, list[int]] = {}
        for i, p in enumerate(self.products):
            groups.setdefault(p.query, []).append(i)
        return {q: tuple(ix) for q, ix in groups.items()}

    @cached_property
    def option_values(self) -> frozenset[str]:
        """Every option value any product offers."""
        return frozenset(v for p in self.products for v in p.option_values)


# GENERATION

def _brands(rng: random.Random, count: int) -> list[str]:
    first, second = BRAND_SYLLABLES
    names: list[str] = []
    while len(names) < count:
        name = (rng.choice(first) + rng.choice(second)).capitalize()
        if name not in names:
            names.append(name)
    return names


def _asin(rng: random.Random, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choice(_ASIN_CHARS) for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin


@cache
def confusable(a: str, b: str) -> bool:
    """Whether the reward would take option value ``a`` for ``b``."""
    return fuzzy_score(normalize_color(a), normalize_color(b)) > FUZZY_THRESHOLD


def _distinct_values(values: Sequence[str], count: int, rng: random.Random) -> tuple[str, ...]:
    """Up to ``count`` values, no two of which the reward would confuse; in pool order."""
    chosen: list[str] = []
    for value in rng.sample(list(values), len(values)):
        if not any(confusable(value, c) for c in chosen):
            chosen.append(value)
        if len(chosen) == count:
            break
    return tuple(v for v in values if v in chosen)


def _title_case(phrase: str) -> str:
    return " ".join(w if any(c.isdigit() for c in w) else w.capitalize() for w in phrase.split())


def _title(ptype: ProductType, brand: str, shown: Sequence[str], form: int) -> str:
    noun = ptype.title_noun
    audience = f" {ptype.audience}" if ptype.audience else ""
    words = [_title_case(a) for a in shown]
    if form == 0 or len(words) == 1:
        rest = f", {words[1]}" if len(words) > 1 else ""
        return f"{brand} {words[0]} {noun}{audience}{rest}"
    if form == 1:
        return f"{brand} {noun}{audience} with {words[0]} and {words[1]}"
    return f"{brand} {words[0]} {words[1]} {noun}{audience}"


def _options(ptype: ProductType, rng: random.Random) -> tuple[tuple[str, tuple[str, ...]], ...]:
    groups = []
    for name, values in ptype.options:
        count = rng.randint(2, min(5, len(values))) if len(values) > 1 else 1
        groups.append((name, _distinct_values(values, count, rng)))
    return tuple(groups)


def _pool(ptype: ProductType) -> tuple[str, ...]:
    return ptype.attributes + tuple(a for a in CATEGORY_ATTRIBUTES[ptype.category]
                                    if a not in ptype.attributes)


def make_product(ptype: ProductType, brand: str, asin: str, rng: random.Random,
                 attributes: tuple[str, ...] | None = None, form: int | None = None) -> Product:
    """One product of ``ptype`` (see the module notes for what its texts contain)."""
    if attributes is None:
        pool = _pool(ptype)
        attributes = tuple(rng.sample(pool, rng.randint(2, min(4, len(pool)))))
    low, high = ptype.price_range
    price = round(int(rng.uniform(low, high)) + 0.99, 2)
    shown = attributes[:rng.randint(1, 2)]
    title = _title(ptype, brand, shown, rng.randrange(3) if form is None else form)
    benefits = BENEFITS[ptype.category]
    bullets = tuple(f"{a.upper()} - {rng.choice(benefits)}" for a in attributes)
    if rng.random() < 0.5:
        bullets += (rng.choice(benefits).capitalize() + ".",)
    noun = ptype.title_noun.lower()
    description = " ".join([f"This {noun} by {brand} is {rng.choice(benefits)}."]
                           + rng.sample(DESCRIPTIONS[ptype.category], 2))
    rating = round(rng.uniform(3.0, 5.0), 1)
    band = 0 if rating < 3.5 else 1 if rating < 4.3 else 2
    reviews = tuple(rng.sample(REVIEWS[band], rng.randint(0, 2)))
    return Product(asin=asin, category=ptype.category, query=ptype.query,
                   product_category=ptype.path, title=title, price=price,
                   bullet_points=bullets, description=description, attributes=attributes,
                   options=_options(ptype, rng), rating=rating, reviews=reviews,
                   product_type=ptype.type_id)


def _variant_attributes(base: tuple[str, ...], pool: tuple[str, ...],
                        rng: random.Random) -> tuple[tuple[str, ...], str]:
    """``base`` with one attribute swapped for another of the pool (or dropped); and that one."""
    spare = [a for a in pool if a not in base]
    out = list(base)
    k = rng.randrange(len(out))
    lost = out[k]
    if spare and (len(out) <= 2 or rng.random() < 0.7):
        out[k] = rng.choice(spare)
    else:
        del out[k]
    return tuple(out), lost


def _cross_sell(product: Product, lost: str, brand: str, noun: str) -> Product:
    """A variant that points to its line's other listing for the attribute it lacks.

    The attribute is written hyphenated (``slim-fit``): a search matches its
    words, the reward's substring test does not (it lacks it).
    """
    if " " not in lost:
        return product
    line = f"Looking for {lost.replace(' ', '-')}? Ask about the rest of the {brand} {noun} line."
    return replace(product, bullet_points=product.bullet_points + (line,))


def generate_catalog(num_products: int = 1000, seed: int = 0) -> Catalog:
    """``num_products`` products spread evenly over the product types, shuffled by ``seed``.

    Products come in lines of one to four of a type and brand: the first sets
    the attributes, each later one swaps or drops one of them, so a line's
    listings share their title words and differ in a requested attribute, their
    options or their price.
    """
    if num_products < len(PRODUCT_TYPES):
        raise ValueError(f"num_products={num_products}: the generator needs at least one "
                         f"product per type ({len(PRODUCT_TYPES)})")
    rng = random.Random(seed)
    brands = {cat: _brands(rng, 24) for cat in sorted({t.category for t in PRODUCT_TYPES})}
    per_type = [num_products // len(PRODUCT_TYPES) + (i < num_products % len(PRODUCT_TYPES))
                for i in range(len(PRODUCT_TYPES))]
    taken: set[str] = set()
    products = []
    for ptype, count in zip(PRODUCT_TYPES, per_type, strict=True):
        made = 0
        while made < count:
            brand, form = rng.choice(brands[ptype.category]), rng.randrange(3)
            line = min(rng.randint(1, 4), count - made)
            base = make_product(ptype, brand, _asin(rng, taken), rng, form=form)
            products.append(base)
            for _ in range(line - 1):
                attrs, lost = _variant_attributes(base.attributes, _pool(ptype), rng)
                variant = make_product(ptype, brand, _asin(rng, taken), rng, attrs, form)
                if lost not in attrs:
                    variant = _cross_sell(variant, lost, brand, ptype.title_noun.lower())
                products.append(variant)
            made += line
    rng.shuffle(products)
    return Catalog(products, source=f"generated(num_products={num_products}, seed={seed})")
