"""Loading WebShop's own product, attribute and human-goal files (sample files in data/)."""

import json
from pathlib import Path

import pytest

from agentcredit.envs.webshop.engine import task_goal
from agentcredit.envs.webshop.official import load_human_goals, official_tasks
from agentcredit.envs.webshop.official_catalog import (
    WebShopFileError,
    load_products,
    parse_pricing,
)
from agentcredit.verifier.reconstruction import evidence_timeline

DATA = Path(__file__).parent / "data"
PRODUCTS, ATTRIBUTES, GOALS = (DATA / "items_sample.json", DATA / "items_ins_sample.json",
                               DATA / "items_human_ins_sample.json")


def test_products_load_in_webshops_way():
    catalog = load_products(PRODUCTS, ATTRIBUTES)
    assert [p.asin for p in catalog.products] == ["B07ZXKQ1RJ", "B09Q67H373", "B08TUX0SH1",
                                                   "B01MUGTEA2"]
    hair = catalog.get("b07zxkq1rj")
    assert hair.query == "hair extensions" and hair.price == 24.99
    assert hair.options == (("color", ("natural black", "dark brown")),
                            ("size", ("14 inch", "20 inch")))
    assert hair.attributes == ("clip in", "natural looking", "human hair")
    assert hair.rating == 4.3 and hair.reviews == ("Lovely: Blends well.",)
    tee = catalog.get("B09Q67H373")
    assert 1.99 <= tee.price <= 8.99 and tee.bullet_points == (
        "Short sleeve crew neck tee in cotton blend",)
    assert dict(tee.options)["color"] == ("b-blue", "black | white", "red")
    assert catalog.get("B01MUGTEA2").price == 100.0 and catalog.get("B01MUGTEA2").options == ()
    assert load_products(PRODUCTS).get("B07ZXKQ1RJ").attributes == ()


def test_a_price_range_gets_the_same_price_inside_it_on_every_load():
    assert parse_pricing("$1.99 to $8.99", "B0X") == parse_pricing("$1.99 - $8.99", "B0X")
    assert parse_pricing("$12", "B0X") == 12.0 and parse_pricing("", "B0X") == 100.0


def test_human_goals_skip_attributeless_and_unknown_items_and_add_the_price_clause():
    catalog = load_products(PRODUCTS, ATTRIBUTES)
    goals = load_human_goals(catalog, GOALS)
    assert [g.asin for g in goals] == ["B01MUGTEA2", "B07ZXKQ1RJ", "B08TUX0SH1"]
    tux = goals[2]
    assert tux.goal_options == ("b-blue", "xx-large") and tux.option_names == ("color", "size")
    assert tux.instruction_text.endswith(f", and price lower than {tux.price_upper:.2f} dollars")
    assert tux.name == catalog.get("B08TUX0SH1").title and tux.query == "men's tuxedo shirts"
    assert goals[1].instruction_text.startswith("i need natural looking clip in hair extensions "
                                                "in natural black, 20 inch, and price")


def test_official_tasks_are_solved_by_the_expert_and_verified_exactly(env, play):
    tasks = official_tasks("train", PRODUCTS, GOALS, ATTRIBUTES, valid_goals=0, test_goals=0)
    assert len(tasks) == 3 and {t.task_type for t in tasks} == {"beauty", "fashion", "food"}
    assert json.loads(json.dumps(tasks[0].payload)) == tasks[0].payload
    for task in tasks:
        verifier = env.verifier(task)
        texts, states, results = play(env, task, env.expert(task))
        assert results[-1][2].won, task_goal(task)
        timeline = evidence_timeline(verifier, texts, states)
        assert all(verifier.score(s, e) == verifier.original(s)
                   for s, e in zip(states, timeline, strict=True))


def test_the_tee_for_a_tuxedo_goal_scores_partially_as_in_vict_case_f2(env, play):
    task = next(t for t in official_tasks("train", PRODUCTS, GOALS, ATTRIBUTES, valid_goals=0,
                                          test_goals=0) if task_goal(t).asin == "B08TUX0SH1")
    _, states, results = play(env, task, ["search[tuxedo shirt short sleeve tee]",
                                          "click[b09q67h373]", "click[b-blue]", "click[xx-large]",
                                          "click[buy now]"])
    verifier = env.verifier(task)
    statuses = verifier.statuses(states[-1], {})
    assert statuses["option:b-blue"].value == statuses["option:xx-large"].value == "sat"
    assert all(statuses[f"attribute:{a}"].value == "unsat"
               for a in ("slim fit", "long sleeve", "polyester cotton"))
    assert 0 < results[-1][0] < 1 and results[-1][0] == verifier.score(states[-1], {})


def test_missing_or_malformed_files_are_named_in_the_error(tmp_path):
    with pytest.raises(WebShopFileError, match="nowhere.json"):
        load_products(tmp_path / "nowhere.json")
    bad = tmp_path / "items.json"
    bad.write_text(json.dumps({"asin": "B0"}))
    with pytest.raises(WebShopFileError, match="JSON list"):
        load_products(bad)
    bad.write_text(json.dumps([{"title": "no asin"}]))
    with pytest.raises(WebShopFileError, match="lacks 'asin'"):
        load_products(bad)
    empty = tmp_path / "goals.json"
    empty.write_text("{}")
    with pytest.raises(WebShopFileError, match="no usable goals"):
        load_human_goals(load_products(PRODUCTS, ATTRIBUTES), empty)
