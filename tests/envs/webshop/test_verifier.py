"""The WebShop verifier: F reproduces the reward exactly; atoms, evidence, commits, mutations."""

import itertools

import pytest

from agentcredit.credit.vict.diagnostics import irreversibility_breaks
from agentcredit.envs.webshop.catalog import Catalog, Product
from agentcredit.envs.webshop.engine import task_goal, task_shop
from agentcredit.envs.webshop.expert import choose_options
from agentcredit.envs.webshop.goals import Goal
from agentcredit.envs.webshop.shop import register_catalog
from agentcredit.envs.webshop.tasks import goal_tasks
from agentcredit.verifier.atoms import Status
from agentcredit.verifier.reconstruction import evidence_timeline, mutation_outcomes
from agentcredit.verifier.trace import trace_rollout

MUTATIONS = {"change_price", "remove_required_attribute", "change_selected_option",
             "swap_purchased_product"}


def _check_all_states(verifier, texts, states):
    timeline = evidence_timeline(verifier, texts, states)
    for state, evidence in zip(states, timeline, strict=True):
        assert verifier.score(state, evidence) == verifier.original(state)
    return timeline


def _near_misses(env, task):
    """Buy each of the top ten key-term results, with the goal's options where offered."""
    goal = task_goal(task)
    obs = env.reset(task)
    obs, *_ = env.step("search[" + goal.query + " " + " ".join(goal.attributes) + "]")
    asins = [a for a in obs.admissible_actions if a.startswith("click[b0")]
    for k, asin in enumerate(asins):
        product = task_shop(task).catalog.get(asin[6:-1])
        options = choose_options(product, goal)[: k % 3]
        yield ["search[" + goal.query + "]", asin, *(f"click[{v}]" for v in options),
               "click[buy now]"]


@pytest.mark.slow
def test_f_equals_v_on_expert_random_near_miss_and_mutated_trajectories(env, test_tasks, play,
                                                                         random_actions):
    states_checked, mutants, scores = 0, 0, set()
    for task in test_tasks[:60]:
        verifier = env.verifier(task)
        runs = [env.expert(task)] + [random_actions(env, task, seed=s) for s in range(3)]
        runs += list(_near_misses(env, task))[:4]
        for actions in runs:
            texts, states, results = play(env, task, actions)
            timeline = _check_all_states(verifier, texts, states)
            for state, (reward, _, _) in zip(states[1:], results, strict=True):
                assert verifier.original(state) == reward
            states_checked += len(states)
            scores.add(verifier.original(states[-1]))
            for state, evidence in zip(states, timeline, strict=True):
                for outcome in mutation_outcomes(verifier, state, evidence):
                    assert outcome.agrees, (task.task_id, outcome)
                    mutants += 1
    assert states_checked > 2000 and mutants > 8000
    assert len(scores) >= 10 and 0.0 in scores and 1.0 in scores


def test_f_equals_v_on_purchases_of_every_kind_of_search_hit(env, test_tasks, play):
    from agentcredit.envs.webshop.reward import type_match
    from agentcredit.envs.webshop.snapshot import purchase_of

    levels = set()
    for task in test_tasks[:100]:
        verifier, goal = env.verifier(task), task_goal(task)
        for query in ("shirt for men", "coffee", "tea", "leather", "wool"):
            texts, states, _ = play(env, task, [f"search[{query}]", "click[next >]"])
            asins = [a for a in env.admissible_actions() if a.startswith("click[b0")][:3]
            for asin in asins:
                texts, states, _ = play(env, task, [f"search[{query}]", "click[next >]", asin,
                                                    "click[buy now]"])
                _check_all_states(verifier, texts, states)
                levels.add(type_match(purchase_of(states[-1]), goal.spec()).r_type)
    assert levels >= {0.0, 0.5, 1.0}


def _product(asin, title, path="Clothing › Men › Tuxedo Shirts", query="tuxedo shirts"):
    return Product(asin=asin, category="fashion", query=query, product_category=path,
                   title=title, price=30.99, bullet_points=("SLIM FIT - sharp",),
                   description="", attributes=("slim fit",),
                   options=(("color", ("black", "white")),))


def test_f_equals_v_and_the_type_ladder_reads_r_type_at_every_level(env, play):
    target = _product("B0TARGET01", "Velora Tuxedo Shirt Men Cotton Collar Cufflinks Wedding "
                                    "Party Prom Dinner Gift")
    others = {1.0: _product("B0SAMETYPE", "Kortix Tuxedo Shirt"),
              0.5: _product("B0HALFTYPE", "Harbor Cotton Collar Stays", "Home › Storage", "q"),
              0.1: _product("B0TENTHTYP", "Dinner Plate Set", "Home › Kitchen", "plates"),
              0.0: _product("B0NOTATYPE", "Zanora Wireless Earbuds", "Electronics", "earbuds")}
    spec = register_catalog("ladder", Catalog([target, *others.values()], "test"))
    goal = Goal(asin=target.asin, category="fashion", query=target.query, name=target.title,
                product_category=target.product_category, instruction_text="a tuxedo shirt",
                attributes=("slim fit",), goal_options=("black",), option_names=("color",),
                price_upper=40.0)
    task = goal_tasks([goal], "test", spec)[0]
    verifier = env.verifier(task)
    for r_type, product in others.items():
        texts, states, results = play(env, task, [f"search[{product.title}]",
                                                  f"click[{product.asin.lower()}]",
                                                  "click[black]", "click[buy now]"])
        _check_all_states(verifier, texts, states)
        assert results[-1][0] == r_type
        statuses = verifier.statuses(states[-1], {})
        ladder = [statuses[j] is Status.SAT
                  for j in ("product_type", "title_overlap", "category_match")]
        assert ladder == [r_type >= 0.1, r_type >= 0.5, r_type == 1.0]
        assert verifier.atom("product_type").value(states[-1], {}) == r_type
        assert (statuses["wrong_purchase"] is Status.VIOL) == (r_type == 0.0)


def test_mutations_of_a_won_state_make_the_purchase_fail_for_both_f_and_v(env, test_tasks, play):
    for task in test_tasks[:30]:
        verifier = env.verifier(task)
        texts, states, results = play(env, task, env.expert(task))
        assert results[-1][2].won
        timeline = evidence_timeline(verifier, texts, states)
        outcomes = mutation_outcomes(verifier, states[-1], timeline[-1])
        assert {o.name for o in outcomes} == MUTATIONS
        for outcome in outcomes:
            if outcome.name == "change_selected_option" and not task_goal(task).goal_options:
                continue
            assert outcome.f_score == outcome.v_score < 1.0, (task.task_id, outcome)


def test_atoms_cover_type_attributes_options_price_commit_and_wrong_purchase(env, test_tasks):
    task = next(t for t in test_tasks if len(task_goal(t).goal_options) == 2)
    goal, verifier = task_goal(task), env.verifier(task)
    ids = [a.atom_id for a in verifier.atoms]
    assert ids == (["product_type", "title_overlap", "category_match"]
                   + [f"attribute:{a}" for a in goal.attributes]
                   + [f"option:{o}" for o in goal.goal_options]
                   + ["price_under_budget", "purchase_committed", "wrong_purchase"])
    roles = {a.atom_id: a.score_role for a in verifier.atoms}
    assert roles["product_type"] == "graded" and roles["wrong_purchase"] == "penalty"
    assert verifier.atom("category_match").dependencies == ("title_overlap",)
    assert verifier.atom("title_overlap").dependencies == ("product_type",)
    attributes = [j for j in ids if j.startswith("attribute:")]
    selection = tuple(j for j in ids if j.startswith("option:")) + ("price_under_budget",)
    assert all(verifier.atom(j).dependencies == ("product_type",) for j in attributes)
    # the VICT paper's Table 15: a selected option is a valid write while the type is UNSAT,
    # and the purchase (and a wrong one) commits the selection
    assert all(verifier.atom(j).dependencies == () for j in selection)
    assert verifier.atom("purchase_committed").dependencies == selection
    assert verifier.atom("wrong_purchase").dependencies == selection
    name = goal.option_names[0]
    assert f"selected:{name}" in verifier.atom(f"option:{goal.goal_options[0]}").state_vars


def test_atoms_are_unknown_until_a_product_is_opened_then_judge_it(env, test_tasks, play):
    task = test_tasks[0]
    verifier = env.verifier(task)
    plan = env.expert(task)
    texts, states, _ = play(env, task, plan)
    timeline = evidence_timeline(verifier, texts, states)
    first = verifier.statuses(states[1], timeline[1])
    assert first["product_type"] is Status.UNK and first["purchase_committed"] is Status.UNSAT
    opened = plan.index(next(a for a in plan if a.startswith("click[b0"))) + 1
    at_item = verifier.statuses(states[opened], timeline[opened])
    assert all(at_item[a.atom_id] is Status.SAT for a in verifier.atoms
               if a.atom_id.startswith(("product_type", "attribute:", "price")))
    last = verifier.statuses(states[-1], timeline[-1])
    assert all(s is Status.SAT for j, s in last.items() if j != "wrong_purchase")
    assert last["wrong_purchase"] is Status.UNSAT
    assert verifier.atom("product_type").value(states[-1], timeline[-1]) == 1.0


def test_right_options_on_the_wrong_product_case_study_f2(env, test_tasks, play):
    """VICT F.2: correct options and price on a product missing the hard attributes."""
    task = next(t for t in test_tasks if t.task_type == "fashion"
                and task_goal(t).query == "men's tuxedo shirts")
    goal, verifier = task_goal(task), env.verifier(task)
    catalog = task_shop(task).catalog
    tee = next(p for p in catalog.products if p.query == "men's t-shirts"
               and p.price <= goal.price_upper and all(choose_options(p, goal))
               and len(choose_options(p, goal)) == len(goal.goal_options)
               and not set(goal.attributes) & set(p.attributes))
    obs = env.reset(task)
    obs, *_ = env.step(f"search[{tee.title}]")
    assert f"click[{tee.asin.lower()}]" in obs.admissible_actions
    actions = [f"search[{tee.title}]", f"click[{tee.asin.lower()}]",
               *(f"click[{v}]" for v in choose_options(tee, goal)), "click[buy now]"]
    texts, states, results = play(env, task, actions)
    statuses = verifier.statuses(states[-1], evidence_timeline(verifier, texts, states)[-1])
    assert all(statuses[f"option:{o}"] is Status.SAT for o in goal.goal_options)
    assert statuses["price_under_budget"] is Status.SAT
    assert statuses["purchase_committed"] is Status.SAT
    missing = [a for a in goal.attributes if statuses[f"attribute:{a}"] is Status.UNSAT]
    assert missing and not results[-1][2].won
    assert verifier.is_commit(actions[-1])
    assert set(verifier.commit_scope(actions[-1])) == {a.atom_id for a in verifier.atoms}
    assert verifier.score(states[-1], {}) == verifier.original(states[-1]) == results[-1][0]


def test_buying_a_product_of_another_type_is_a_wrong_purchase_violation(env, test_tasks, play):
    task = next(t for t in test_tasks if task_goal(t).query == "men's tuxedo shirts")
    verifier = env.verifier(task)
    catalog = task_shop(task).catalog
    table = next(p for p in catalog.products if p.query == "coffee table")
    _, states, results = play(env, task, [f"search[{table.title}]",
                                          f"click[{table.asin.lower()}]", "click[buy now]"])
    statuses = verifier.statuses(states[-1], {})
    assert statuses["wrong_purchase"] is Status.VIOL
    assert statuses["product_type"] is Status.UNSAT
    assert verifier.score(states[-1], {}) == verifier.original(states[-1]) == 0.0 == results[-1][0]


def test_option_clicks_write_and_pages_reveal_evidence_by_section(env, test_tasks, play):
    task = next(t for t in test_tasks if task_goal(t).goal_options)
    goal, verifier = task_goal(task), env.verifier(task)
    plan = env.expert(task)
    asin = next(a for a in plan if a.startswith("click[b0"))
    actions = plan[:plan.index(asin) + 1] + ["click[features]", "click[< prev]", "click[bogus]"]
    actions += plan[plan.index(asin) + 1:]
    texts, states, _ = play(env, task, actions)
    timeline = evidence_timeline(verifier, texts, states)
    opened = actions.index(asin) + 1
    code = asin[6:-1].upper()
    assert timeline[opened]["evidence:title"] == timeline[opened]["evidence:price"] == code
    assert timeline[1]["evidence:results"].endswith("#1")
    assert timeline[opened + 1]["evidence:features"] == code
    assert timeline[opened + 3] == timeline[opened + 2]  # the invalid click revealed nothing
    option_atom = verifier.atom(f"option:{goal.goal_options[0]}")
    key = f"selected:{goal.option_names[0]}"
    click = opened + 4
    assert key in option_atom.state_vars and states[click].get(key) != states[click - 1].get(key)
    assert timeline[-1]["evidence:purchase"] == code


@pytest.mark.parametrize("action, commits", [("click[buy now]", True), (" CLICK[ Buy Now ] ", True),
                                              ("click[buy]", False), ("search[buy now]", False)])
def test_only_buy_now_commits(env, test_tasks, action, commits):
    verifier = env.verifier(test_tasks[0])
    assert verifier.is_commit(action) is commits
    assert bool(verifier.commit_scope(action)) is commits


def test_only_buy_now_writes_what_purchase_committed_reads(env, test_tasks, play,
                                                         random_actions):
    task = test_tasks[1]
    watched = env.verifier(task).atom("purchase_committed").state_vars
    for actions in (env.expert(task), random_actions(env, task, seed=4)):
        _, states, _ = play(env, task, actions)
        for t, (before, after) in enumerate(itertools.pairwise(states)):
            wrote = any(before.get(v) != after.get(v) for v in watched)
            assert wrote == (actions[t] == "click[buy now]" and after["purchased"])


def _abandoned_then_bought(env, task, play):
    """The expert's plan with a detour: open another product from the same results page,
    click its options, go back, then buy as the expert does. Returns actions, played."""
    plan = env.expert(task)
    bought = next(a for a in plan if a.startswith("click[b0"))
    at = plan.index(bought)
    obs = env.reset(task)
    for action in plan[:at]:
        obs, *_ = env.step(action)
    other = next(a for a in obs.admissible_actions if a.startswith("click[b0") and a != bought)
    obs, *_ = env.step(other)
    shown = [a for a in obs.admissible_actions if a.startswith("click[")
             and a not in ("click[buy now]", "click[< prev]", "click[back to search]",
                           "click[description]", "click[features]", "click[reviews]")]
    detour = [other, *shown[:2], "click[< prev]"]
    actions = plan[:at] + detour + plan[at:]
    return actions, detour, play(env, task, actions)


def test_only_the_bought_product_gets_product_edges_not_one_opened_and_abandoned(env, test_tasks,
                                                                                 play):
    """docs/vict.md §4.3: product atoms are bound to the product bought, so opening another
    product and clicking its options writes and reveals nothing they read."""
    task = next(t for t in test_tasks if task_goal(t).goal_options and task_goal(t).attributes)
    goal, verifier = task_goal(task), env.verifier(task)
    actions, detour, (texts, states, results) = _abandoned_then_bought(env, task, play)
    start = actions.index(detour[0])
    option_key = f"selected:{goal.option_names[0]}"
    assert any(states[t + 1].get(option_key) != states[t].get(option_key)
               for t in range(start + 1, start + 3)), "the detour chose none of its options"
    assert results[-1][0] == 1.0  # the expert's purchase still wins
    trace = trace_rollout(verifier, texts, states, actions)
    detour_steps = set(range(start, start + len(detour)))
    assert not [e for e in trace.edges if e.step in detour_steps]
    bought = start + len(detour)  # the click that opens the product bought
    option = f"option:{goal.goal_options[0]}"
    opened = {(e.atom_id, e.relation) for e in trace.edges if e.step == bought}
    assert {(option, "write"), (option, "reveal"),
            (f"attribute:{goal.attributes[0]}", "write")} <= opened
    chosen = {e.relation for e in trace.edges if e.atom_id == option and e.step > bought
              and actions[e.step] != "click[buy now]"}
    assert chosen == {"write"}  # the option click on the product bought


def test_a_results_list_reveals_only_the_products_it_listed(env, test_tasks, play):
    """docs/vict.md §4.3: a results page is evidence about the product bought only when it
    listed that product; a search that showed other products reveals nothing about it."""
    task = test_tasks[0]
    verifier, plan = env.verifier(task), env.expert(task)
    bought = next(a for a in plan if a.startswith("click[b0"))
    for query in ("coffee", "wireless earbuds", "coffee table", "dog food", "lipstick"):
        obs = env.reset(task)
        obs, *_ = env.step(f"search[{query}]")
        if bought not in obs.admissible_actions:
            break
    else:
        pytest.skip("every probe query listed the product bought")
    actions = [f"search[{query}]", "click[back to search]", *plan]
    texts, states, results = play(env, task, actions)
    assert results[-1][0] == 1.0
    trace = trace_rollout(verifier, texts, states, actions)
    reveals = {(e.step, e.atom_id) for e in trace.edges if e.relation == "reveal"}
    listed = actions.index(plan[0])  # the expert's search lists the product it buys
    assert (listed, "product_type") in reveals
    assert not {(0, "product_type"), (0, "price_under_budget")} & reveals
    assert not [e for e in trace.edges if e.step in (0, 1)]


def test_only_the_purchase_atoms_are_irreversible_and_no_rollout_breaks_a_flag(
        env, test_tasks, play, random_actions):
    verifier = env.verifier(test_tasks[2])
    assert [a.atom_id for a in verifier.atoms if a.irreversible] == [
        "purchase_committed", "wrong_purchase"]
    assert {a.level for a in verifier.atoms if a.atom_id != "purchase_committed"} == {1}
    assert verifier.atom("purchase_committed").level == 0
    for task in test_tasks[:10]:
        verifier = env.verifier(task)
        for actions in (env.expert(task), random_actions(env, task, seed=3)):
            texts, states, _ = play(env, task, actions)
            assert irreversibility_breaks(trace_rollout(verifier, texts, states, actions)) == ()
