"""The WebShop engine: page flow, actions, step limit, bad actions, determinism."""

import pytest

from agentcredit.envs.base import Environment
from agentcredit.envs.webshop.engine import WebShopEnv, task_goal, task_shop
from agentcredit.envs.webshop.verifier import build_verifier


def _open_first_result(env, task, query=None):
    env.reset(task)
    obs, *_ = env.step(f"search[{query or task_goal(task).query}]")
    asin = next(a for a in obs.admissible_actions if a.startswith("click[b0"))
    obs, *_ = env.step(asin)
    return obs, asin


def test_webshop_env_speaks_the_environment_protocol():
    assert isinstance(WebShopEnv(), Environment) and WebShopEnv.name == "webshop"


def test_reset_shows_the_search_page_with_the_instruction(env, test_tasks):
    task = test_tasks[0]
    obs = env.reset(task)
    assert obs.text == f"WebShop [SEP] Instruction: [SEP] {task.instruction} [SEP] Search"
    assert obs.admissible_actions == ("search[<your query>]",)
    assert env.snapshot() == {"page": "search", "query": "", "results_page": 0,
                              "purchased": False, "product:asin": ""}


def test_results_come_ten_per_page_up_to_fifty_with_next_and_prev(env, test_tasks):
    task = test_tasks[0]
    env.reset(task)
    obs, reward, done, info = env.step("search[shirt for men]")
    assert info.valid and not done and reward == 0.0
    assert "Page 1 (Total results: 50)" in obs.text and "Next >" in obs.text
    asins = [a for a in obs.admissible_actions if a.startswith("click[b0")]
    assert len(asins) == 10 and "click[< prev]" not in obs.admissible_actions
    shown = [a[6:-1].upper() for a in asins]
    assert all(f"[SEP] {asin} [SEP]" in obs.text for asin in shown)
    for page in range(2, 6):
        obs, *_ = env.step("click[next >]")
        assert f"Page {page} (Total results: 50)" in obs.text
    assert "click[next >]" not in obs.admissible_actions
    obs, *_ = env.step("click[< prev]")
    assert "Page 4 " in obs.text and env.snapshot()["results_page"] == 4


def test_an_item_page_offers_options_sections_buy_and_navigation(env, test_tasks):
    task = test_tasks[0]
    obs, asin = _open_first_result(env, task)
    product = task_shop(task).catalog.get(asin[6:-1])
    assert obs.admissible_actions == (
        "click[back to search]", "click[< prev]",
        *(f"click[{v}]" for v in product.option_values),
        "click[description]", "click[features]", "click[reviews]", "click[buy now]")
    assert product.title in obs.text and f"Price: ${product.price:.2f}" in obs.text
    obs, *_ = env.step("click[features]")
    assert all(b in obs.text for b in product.bullet_points)
    assert obs.admissible_actions == ("click[back to search]", "click[< prev]")
    obs, *_ = env.step("click[< prev]")
    assert env.snapshot()["page"] == "item"
    obs, *_ = env.step("click[< prev]")
    assert env.snapshot()["page"] == "results" and "Page 1 " in obs.text
    obs, *_ = env.step("click[back to search]")
    assert obs.admissible_actions == ("search[<your query>]",)


def test_choosing_an_option_replaces_its_group_and_opening_a_product_clears_choices(
        env, test_tasks):
    task = next(t for t in test_tasks if t.task_type == "fashion")
    _, asin = _open_first_result(env, task)
    product = task_shop(task).catalog.get(asin[6:-1])
    name, values = next((n, v) for n, v in product.options if len(v) >= 2)
    env.step(f"click[{values[0]}]")
    env.step(f"click[{values[1]}]")
    assert env.snapshot()[f"selected:{name}"] == values[1]
    env.step("click[< prev]")
    env.step(asin)
    assert not any(k.startswith("selected:") for k in env.snapshot())


def test_buying_ends_the_episode_with_the_reward_and_success_only_at_one(env, test_tasks):
    for task in test_tasks[:40]:
        verifier = build_verifier(task, task_goal(task), task_shop(task))
        _open_first_result(env, task)
        obs, reward, done, info = env.step("click[buy now]")
        assert done and info.valid and env.snapshot()["purchased"]
        assert reward == verifier.original(env.snapshot())
        assert info.won == (reward == 1.0)
        assert obs.admissible_actions == () and "Thank you for shopping" in obs.text
        obs, again, done, info = env.step("click[buy now]")
        assert not info.valid and done and again == reward


@pytest.mark.parametrize("action, reason", [
    ("click[b0zzzzzzzz]", "not listed"),
    ("x" * 10_000, "longer than"),
    ("search[]", "empty"),
    ("search[   ]", "empty"),
    ("buy the shirt", "expected search"),
    ("", "expected search"),
])
def test_bad_actions_on_the_search_or_results_page_are_invalid_steps(env, test_tasks, action,
                                                                      reason):
    task = test_tasks[0]
    env.reset(task)
    if not action.startswith("search"):
        env.step("search[shirt]")
    before = env.snapshot()
    obs, reward, done, info = env.step(action)
    assert not info.valid and not done and reward == 0.0
    assert obs.text.startswith("Invalid action:") and reason in obs.text
    assert env.snapshot() == before


def test_on_an_item_page_an_option_of_another_product_is_invalid(env, test_tasks):
    task = test_tasks[0]
    _, asin = _open_first_result(env, task)
    catalog = task_shop(task).catalog
    here = set(catalog.get(asin[6:-1]).option_values)
    foreign = next(v for p in catalog.products for v in p.option_values if v not in here)
    before = env.snapshot()
    for action in (f"click[{foreign}]", "search[shirt]", "click[next >]", None, 42):
        _, _, done, info = env.step(action)
        assert not info.valid and not done and env.snapshot() == before
    assert "not an option of this product" in env.step(f"click[{foreign}]")[0].text


def test_fifteen_steps_end_the_episode_unbought(env, test_tasks):
    task = test_tasks[0]
    env.reset(task)
    env.step("search[shirt]")
    results = [env.step(a) for a in ["click[next >]", "click[< prev]"] * 7]
    assert [done for _, _, done, _ in results] == [False] * 13 + [True]
    assert results[-1][1] == 0.0 and not results[-1][3].won
    assert not env.step("click[next >]")[3].valid


def test_actions_are_case_and_space_tolerant_like_webshops_lowercased_clicks(env, test_tasks):
    task = test_tasks[0]
    env.reset(task)
    obs, *_ = env.step("  Search[ Shirt ]  ")
    asin = next(a for a in obs.admissible_actions if a.startswith("click[b0"))
    obs, _, _, info = env.step(f"CLICK[{asin[6:-1].upper()}]")
    assert info.valid and env.snapshot()["page"] == "item"


def test_the_same_actions_give_the_same_episode(test_tasks, play, random_actions):
    for task in test_tasks[:10]:
        actions = random_actions(WebShopEnv(), task, seed=3)
        first = play(WebShopEnv(), task, actions)
        second = play(WebShopEnv(), task, actions)
        assert first[0] == second[0] and first[1] == second[1]
        assert [(r, d, i) for r, d, i in first[2]] == [(r, d, i) for r, d, i in second[2]]


def test_stepping_before_reset_is_a_programming_error():
    with pytest.raises(RuntimeError, match="reset"):
        WebShopEnv().step("search[x]")
