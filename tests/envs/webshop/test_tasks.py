"""WebShop tasks: splits by goal, categories as task types, serialisable payloads."""

import json

import pytest

from agentcredit.envs.webshop.engine import task_goal
from agentcredit.envs.webshop.goals import Goal
from agentcredit.envs.webshop.options import WebShopConfig
from agentcredit.envs.webshop.tasks import SPLITS, build_tasks
from agentcredit.envs.webshop.taxonomy import CATEGORIES


def test_splits_partition_the_goals_with_the_configured_sizes(config):
    tasks = {s: build_tasks(s, config) for s in SPLITS}
    assert [len(tasks[s]) for s in SPLITS] == [1600, 200, 200]
    goals = {s: {json.dumps(t.payload["goal"], sort_keys=True) for t in tasks[s]} for s in SPLITS}
    assert sum(len(g) for g in goals.values()) == len(set().union(*goals.values())) == 2000
    ids = [t.task_id for s in SPLITS for t in tasks[s]]
    assert len(set(ids)) == len(ids)


def test_task_type_is_the_target_category_and_payloads_are_plain_json(test_tasks):
    assert {t.task_type for t in test_tasks} == set(CATEGORIES)
    for task in test_tasks:
        assert task.env == "webshop" and task.split == "test"
        payload = json.loads(json.dumps(task.payload))
        goal = Goal.from_json(payload["goal"])
        assert goal == task_goal(task) and goal.category == task.task_type
        assert goal.instruction_text == task.instruction


def test_goals_request_target_attributes_options_and_a_bound_above_its_price(test_tasks):
    from agentcredit.envs.webshop.engine import task_shop

    phrasings = set()
    for task in test_tasks:
        goal, catalog = task_goal(task), task_shop(task).catalog
        target = catalog.get(goal.asin)
        assert 1 <= len(goal.attributes) <= 3 and set(goal.attributes) <= set(target.attributes)
        assert len(goal.goal_options) == len(target.options)
        assert all(v in dict(target.options)[n] for n, v in zip(goal.option_names,
                                                                goal.goal_options, strict=True))
        assert target.price < goal.price_upper <= target.price + 40
        assert goal.price_upper % 10 == 0
        assert f"price lower than {goal.price_upper:.2f} dollars" in task.instruction
        phrasings.add(task.instruction.split()[0:2].__repr__())
    assert len(phrasings) >= 6


def test_the_same_config_gives_the_same_tasks_and_another_seed_others():
    small = WebShopConfig(num_products=200, goals_per_product=1, valid_goals=20, test_goals=20)
    again = WebShopConfig(num_products=200, goals_per_product=1, valid_goals=20, test_goals=20)
    other = WebShopConfig(num_products=200, goals_per_product=1, valid_goals=20, test_goals=20,
                          seed=1)
    assert build_tasks("test", small) == build_tasks("test", again)
    assert [t.payload for t in build_tasks("test", small)] == [
        t.payload for t in build_tasks("test", again)]
    assert [t.instruction for t in build_tasks("test", small)] != [
        t.instruction for t in build_tasks("test", other)]


def test_bad_splits_and_configs_are_refused_with_the_allowed_values():
    with pytest.raises(ValueError, match="valid_seen"):
        build_tasks("valid_seen")
    with pytest.raises(ValueError, match="num_products"):
        WebShopConfig(num_products=0)
    with pytest.raises(ValueError, match="leave none"):
        build_tasks("train", WebShopConfig(num_products=60, goals_per_product=1,
                                           valid_goals=30, test_goals=30))


def test_every_category_has_a_short_skill_text_naming_the_exact_action_forms(test_tasks):
    from agentcredit.skills.provider import SkillProvider

    provider = SkillProvider()
    assert provider.task_types("webshop") == sorted(CATEGORIES)
    for category in CATEGORIES:
        text = provider.text_for(test_tasks[0].env, category)
        assert "search[" in text and "click[buy now]" in text
        specific = text.split("\n\n# Category: ")[1]
        assert len(specific.split()) < 150
