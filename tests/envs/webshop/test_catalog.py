"""The generated catalog: WebShop's schema, determinism, near-duplicates, clean attribute texts."""

import itertools
import re

from agentcredit.envs.webshop.catalog import confusable, generate_catalog
from agentcredit.envs.webshop.reward import (
    FUZZY_THRESHOLD,
    Purchase,
    attribute_matched,
    fuzzy_score,
    title_nouns,
)
from agentcredit.envs.webshop.shop import open_shop
from agentcredit.envs.webshop.taxonomy import CATEGORIES, CATEGORY_ATTRIBUTES, PRODUCT_TYPES

TYPES = {t.type_id: t for t in PRODUCT_TYPES}


def _pool(ptype):
    return set(ptype.attributes) | set(CATEGORY_ATTRIBUTES[ptype.category])


def _as_purchase(p):
    return Purchase(p.title, p.query, p.product_category, p.attributes, p.bullet_points,
                    p.description, p.price, ())


def test_the_same_seed_gives_the_same_catalog_and_another_seed_another():
    assert generate_catalog(300, seed=5).products == generate_catalog(300, seed=5).products
    assert generate_catalog(300, seed=5).products != generate_catalog(300, seed=6).products


def test_products_follow_webshops_schema_over_its_five_categories(config):
    catalog = open_shop(config.catalog_spec()).catalog
    assert len(catalog) == 1000
    assert {p.category for p in catalog.products} == set(CATEGORIES)
    for p in catalog.products:
        ptype = TYPES[p.product_type]
        assert re.fullmatch(r"B0[A-Z0-9]{8}", p.asin)
        assert p.query == ptype.query and p.product_category == ptype.path
        assert " › " in p.product_category and ptype.title_noun in p.title
        assert ptype.price_range[0] <= p.price <= ptype.price_range[1] + 1
        assert 1 <= len(p.attributes) <= 4 and set(p.attributes) <= _pool(ptype)
        assert p.bullet_points and p.description and p.options
        assert all(v == v.lower() for v in p.option_values)


def test_within_a_type_no_attribute_can_be_mistaken_for_another():
    for ptype in PRODUCT_TYPES:
        for a, b in itertools.permutations(sorted(_pool(ptype)), 2):
            assert fuzzy_score(a, b) <= FUZZY_THRESHOLD, (ptype.type_id, a, b)
            assert a not in b, (ptype.type_id, a, b)


def test_a_product_scores_exactly_the_attributes_it_has(config):
    catalog = open_shop(config.catalog_spec()).catalog
    for p in catalog.products:
        bought = _as_purchase(p)
        for attribute in _pool(TYPES[p.product_type]):
            assert attribute_matched(attribute, bought) == (attribute in p.attributes), (
                p.asin, attribute)


def test_a_product_never_offers_two_option_values_the_reward_would_confuse(config):
    catalog = open_shop(config.catalog_spec()).catalog
    for p in catalog.products:
        for _, values in p.options:
            assert not any(confusable(a, b) for a, b in itertools.combinations(values, 2))


def test_every_product_has_near_duplicates_and_some_share_title_nouns_across_categories(config):
    catalog = open_shop(config.catalog_spec()).catalog
    assert all(len(catalog.by_query[p.query]) >= 10 for p in catalog.products)
    lines = {}
    for p in catalog.products:
        lines.setdefault((p.product_type, p.title.split()[0]), []).append(p)
    assert sum(len(v) > 1 for v in lines.values()) > 50
    crossing = [(a.type_id, b.type_id) for a, b in itertools.combinations(PRODUCT_TYPES, 2)
                if a.category != b.category
                and set(title_nouns(a.title_noun)) & set(title_nouns(b.title_noun))]
    assert len(crossing) >= 3


def test_a_listing_that_lacks_its_lines_attribute_points_to_it_unscored(config):
    catalog = open_shop(config.catalog_spec()).catalog
    pointers = [(p, b) for p in catalog.products for b in p.bullet_points
                if b.startswith("Looking for ")]
    assert len(pointers) > 20
    for p, bullet in pointers:
        wanted = bullet.removeprefix("Looking for ").split("?")[0].replace("-", " ")
        assert wanted not in p.attributes and not attribute_matched(wanted, _as_purchase(p))
