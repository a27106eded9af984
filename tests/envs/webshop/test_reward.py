"""WebShop's reward formula on worked cases (reward.py)."""

import pytest

from agentcredit.envs.webshop.reward import (
    GoalSpec,
    Purchase,
    fuzzy_score,
    normalize_color,
    reward,
    title_nouns,
)

TUXEDO_PATH = "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › Tuxedo Shirts"
GOAL = GoalSpec(title="Velora Slim Fit Tuxedo Shirt for Men, Long Sleeve",
                query="men's tuxedo shirts", product_category=TUXEDO_PATH,
                attributes=("slim fit", "long sleeve"), options=("b-blue", "xx-large"),
                price_upper=40.0)


def _buy(title="Kortix Slim Fit Tuxedo Shirt for Men", query="men's tuxedo shirts",
         path=TUXEDO_PATH, attributes=("slim fit", "long sleeve", "machine wash"),
         bullets=(), description="", price=29.99, selected=("b-blue", "xx-large")):
    return Purchase(title, query, path, tuple(attributes), tuple(bullets), description, price,
                    tuple(selected))


def test_a_product_matching_type_attributes_options_and_budget_scores_exactly_one():
    breakdown = reward(_buy(), GOAL)
    assert breakdown.type_match.r_type == 1.0
    assert breakdown.attributes == (True, True) and breakdown.options == (True, True)
    assert breakdown.price_ok and breakdown.total == 1.0


def test_one_wrong_option_loses_one_of_five_terms():
    assert reward(_buy(selected=("b-blue", "small")), GOAL).total == 4 / 5


def test_a_price_over_budget_loses_the_price_term():
    breakdown = reward(_buy(price=40.01), GOAL)
    assert not breakdown.price_ok and breakdown.total == 4 / 5
    assert reward(_buy(price=40.0), GOAL).total == 1.0


def test_a_missing_attribute_counts_when_the_text_names_it_and_not_when_hyphenated():
    lacking = _buy(attributes=("slim fit",))
    assert reward(lacking, GOAL).total == 4 / 5
    assert reward(_buy(attributes=("slim fit",), bullets=("LONG SLEEVE - french cuffs",)),
                  GOAL).total == 1.0
    assert reward(_buy(attributes=("slim fit",), bullets=("Looking for long-sleeve?",)),
                  GOAL).total == 4 / 5


def test_attributes_and_options_match_fuzzily_with_colours_normalised():
    assert reward(_buy(attributes=("slim fitting", "long sleeves")), GOAL).attributes == (
        True, True)
    assert normalize_color("b-blue") == "blue" and normalize_color("black | white") == "black"
    assert reward(_buy(selected=("blue", "xx-large")), GOAL).options == (True, True)
    assert reward(_buy(selected=("black", "xx-large")), GOAL).options == (False, True)
    # thefuzz's leniency kept: an x-large is taken for an xx-large
    assert fuzzy_score("x-large", "xx-large") > 85


def test_goal_title_nouns_drop_adjectives_colours_and_function_words():
    assert title_nouns(GOAL.title) == ["velora", "fit", "tuxedo", "shirt", "men", "sleeve"]
    assert title_nouns("2 Pack Black Extra Soft Cotton Socks") == ["pack", "cotton", "socks"]


def test_product_type_scores_one_when_nouns_overlap_over_a_fifth():
    buy = _buy(title="Harbor Tuxedo Shirt", query="other", path="Elsewhere › Else")
    match = reward(buy, GOAL).type_match
    assert match.title_score == 2 / 6 and match.r_type == 1.0


def test_product_type_scores_half_on_small_overlap_without_query_or_category_match():
    buy = _buy(title="Harbor Dress Shirt Stays", query="shirt stays",
               path="Home & Kitchen › Storage")
    breakdown = reward(buy, GOAL)
    assert breakdown.type_match.title_score == 1 / 6
    assert breakdown.type_match.r_type == 0.5 and breakdown.total == 0.5


def test_a_category_or_query_match_lifts_a_small_overlap_to_one():
    shared_path = "Clothing, Shoes & Jewelry › Men › Accessories"
    assert reward(_buy(title="Harbor Dress Shirt Stays", query="shirt stays",
                       path=shared_path), GOAL).type_match.r_type == 1.0
    assert reward(_buy(title="Harbor Dress Shirt Stays", path="Home › Storage"),
                  GOAL).type_match.r_type == 1.0


def test_product_type_scores_a_tenth_below_a_tenth_of_the_nouns_whatever_the_category():
    goal = GoalSpec(title="Velora Tuxedo Shirt Men Cotton Collar Cufflinks Wedding Party Prom "
                          "Dinner Gift", query=GOAL.query, product_category=TUXEDO_PATH,
                    attributes=("slim fit",), options=(), price_upper=40.0)
    assert len(title_nouns(goal.title)) == 12
    breakdown = reward(_buy(title="Dinner Plate Set"), goal)
    assert breakdown.type_match.title_score == pytest.approx(1 / 12)
    assert breakdown.type_match.r_type == 0.1 and breakdown.total == pytest.approx(0.1)


def test_a_product_of_another_type_scores_zero_even_with_everything_else_matched():
    breakdown = reward(_buy(title="Zanora Wireless Earbuds"), GOAL)
    assert breakdown.type_match.title_score == 0.0 and breakdown.type_match.r_type == 0.0
    assert breakdown.attributes == (True, True) and breakdown.total == 0.0


def test_a_goal_title_without_nouns_counts_as_a_fifth_overlap():
    goal = GoalSpec(title="Black and White", query="q", product_category="A › B",
                    attributes=("slim fit",), options=(), price_upper=40.0)
    match = reward(_buy(title="Anything Else"), goal).type_match
    assert match.title_score == 0.2 and match.r_type == 0.5
    assert reward(_buy(title="Anything Else", query="q"), goal).type_match.r_type == 1.0
