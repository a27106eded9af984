"""The WebShop planner's solver truth (``envs.webshop.solver.distance_to_buy``)."""

from __future__ import annotations

from agentcredit.envs.webshop.engine import task_goal, task_shop
from agentcredit.envs.webshop.expert import expert_actions
from agentcredit.envs.webshop.solver import distance_to_buy


def test_distance_is_the_expert_plan_then_one_more_step_after_a_wrong_search(env, test_tasks):
    task = next(t for t in test_tasks
                if expert_actions(task_goal(t), task_shop(t))[0]
                != f"search[{task_goal(t).query}]")
    plan = expert_actions(task_goal(task), task_shop(task))
    assert distance_to_buy(env, task, [], cap=30) == len(plan)
    # a search for the product type alone: back to search first, then the whole plan
    wrong = f"search[{task_goal(task).query}]"
    assert distance_to_buy(env, task, [wrong], cap=30) == 1 + len(plan)
    assert distance_to_buy(env, task, [wrong, "click[back to search]"], cap=30) == len(plan)
    assert distance_to_buy(env, task, plan, cap=30) == 0
    assert distance_to_buy(env, task, [], cap=3) == 3
