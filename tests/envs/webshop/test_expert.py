"""The WebShop expert: it solves (nearly) every goal within the step limit."""

from agentcredit.envs.webshop.engine import MAX_STEPS
from agentcredit.envs.webshop.tasks import build_tasks


def test_the_expert_succeeds_on_at_least_95_percent_of_goals(env, config, test_tasks, play):
    tasks = test_tasks + build_tasks("valid", config)
    won, lengths = 0, []
    for task in tasks:
        plan = env.expert(task)
        _, _, results = play(env, task, plan)
        lengths.append(len(plan))
        assert all(info.valid for _, _, info in results), (task.task_id, plan)
        won += results[-1][2].won
    assert won / len(tasks) >= 0.95
    assert max(lengths) <= 10 < MAX_STEPS


def test_the_expert_searches_key_terms_opens_a_product_chooses_options_and_buys(env, test_tasks):
    from agentcredit.envs.webshop.engine import task_goal

    task = next(t for t in test_tasks if len(task_goal(t).goal_options) == 2)
    plan = env.expert(task)
    goal = task_goal(task)
    assert plan[0] == "search[" + " ".join([goal.query, *goal.attributes]) + "]"
    assert plan[-1] == "click[buy now]"
    assert sum(a.startswith("click[b0") for a in plan) == 1
    assert len([a for a in plan if a not in ("click[next >]", "click[buy now]")
                and not a.startswith(("search[", "click[b0"))]) == 2
