"""Worked examples from the VICT paper's WebShop case study (appendix F.2, Tables 15 and 16),
on a three-product shop whose reward terms are worked out by hand from ``reward.py``'s
formula (docs/vict.md §4.4-4.6), not read off the pipeline.

Goal: a "Velora Tuxedo Shirt Men Polyester Cotton" (title nouns velora, tuxedo, shirt, men,
polyester, cotton), attributes slim fit and elastic waist, options b-blue and xx-large,
price under 40. Products:

- ``TUX`` the target: every term matches, reward 1;
- ``TEE`` "Jspoyou Tees Short Sleeve Summer": no title noun in common (``title_score = 0``,
  ``r_type = 0``), in the requested colour and size and cheap: buying it is the paper's
  premature purchase, ``wrong_purchase`` VIOL, reward 0;
- ``CHEAP`` "Kortix Tuxedo Shirt": 2 of 6 nouns (``title_score = 1/3 > 0.2``, ``r_type = 1``),
  no requested attribute, price 5.

The group (reward = ``V`` at the end; GRPO: μ = 2/8, so the two expert rollouts have
``q = +1`` and the six others ``q = −1``):

- ``EXPERT`` ×2 (Table 16, row 4): search, open TUX, b-blue, xx-large, buy;
- ``PREMATURE`` (Table 15; Table 16, row 1): search, open TEE, b-blue, xx-large, buy;
- ``GLANCE`` (Table 16, row 2): search, open CHEAP, stop;
- ``BACK_OFF`` (Table 16, row 3): search, open TEE, back to search, stop;
- ``SEARCH_ONLY`` ×3: search, then stop without opening a product.

Raw atom values δ across the group (1 = SAT; UNK and UNSAT are 0, VIOL −1), per docs/vict.md
§4.5 (``k of 8`` at 1 and the rest at 0 gives median 0 when k ≤ 3 and 1 when k ≥ 5):

| atom | EXPERT ×2 | PREMATURE | GLANCE | BACK_OFF | SEARCH ×3 | δ̂ of a 1 | δ̂ of a 0 / −1 |
| --- | --- | --- | --- | --- | --- | --- | --- |
| product_type (r_type) | 1 | 0 | 1 | 0 | 0 | 2.0656 | 0 |
| title_overlap, category_match | 1 | 0 | 1 | 0 | 0 | 2.0656 | 0 |
| attribute:* | 1 | 0 | 0 | 0 | 0 | 2.3094 | 0 |
| option:* | 1 | 1 | 0 | 0 | 0 | 2.0656 | 0 |
| price_under_budget | 1 | 1 | 1 | 1 | 0 | 0 | −2.0656 |
| purchase_committed | 1 | 1 | 0 | 0 | 0 | 2.0656 | 0 |
| wrong_purchase | 0 | −1 | 0 | 0 | 0 | - | −3.0237 |

(3 of 8 at 1: MAD 0, population std √15/8, δ̂ = 1/(√15/8) = 2.0656; 2 of 8: std √3/4,
2.3094; 1 of 8: std √7/8, 3.0237.)
"""

import math

import pytest
import torch

from agentcredit.credit import CreditBatch
from agentcredit.credit.vict import VICTConfig, compute_credit
from agentcredit.envs.webshop.catalog import Catalog, Product
from agentcredit.envs.webshop.engine import WebShopEnv
from agentcredit.envs.webshop.goals import Goal
from agentcredit.envs.webshop.shop import register_catalog
from agentcredit.envs.webshop.tasks import goal_tasks
from agentcredit.verifier.atoms import Status
from agentcredit.verifier.trace import trace_rollout

EPS = 1e-6
ONE_OF_8 = 1.0 / (math.sqrt(7) / 8 + EPS)  # 3.0237
THREE_OF_8 = 1.0 / (math.sqrt(15) / 8 + EPS)  # 2.0656

OPTIONS = (("color", ("b-blue", "black")), ("size", ("xx-large", "small")))
TUX = Product(asin="B0TUXEDO01", category="fashion", query="men's tuxedo shirts",
              product_category="Clothing › Men › Tuxedo Shirts",
              title="Velora Tuxedo Shirt Men Polyester Cotton", price=30.0,
              bullet_points=("SLIM FIT with an elastic waist",), description="",
              attributes=("slim fit", "elastic waist"), options=OPTIONS)
TEE = Product(asin="B0TEESHIR1", category="fashion", query="tees", product_category="Sports › Tees",
              title="Jspoyou Tees Short Sleeve Summer", price=8.99, bullet_points=(),
              description="", attributes=(), options=OPTIONS)
CHEAP = Product(asin="B0CHEAPSH1", category="fashion", query="men's tuxedo shirts",
                product_category="Clothing › Men › Tuxedo Shirts", title="Kortix Tuxedo Shirt",
                price=5.0, bullet_points=(), description="", attributes=(), options=OPTIONS)

SEARCH = "search[tuxedo shirt tees]"
EXPERT = (SEARCH, "click[b0tuxedo01]", "click[b-blue]", "click[xx-large]", "click[buy now]")
PREMATURE = (SEARCH, "click[b0teeshir1]", "click[b-blue]", "click[xx-large]", "click[buy now]")
GLANCE = (SEARCH, "click[b0cheapsh1]")
BACK_OFF = (SEARCH, "click[b0teeshir1]", "click[back to search]")
SEARCH_ONLY = (SEARCH,)
GROUP = (EXPERT, EXPERT, PREMATURE, GLANCE, BACK_OFF, SEARCH_ONLY, SEARCH_ONLY, SEARCH_ONLY)


@pytest.fixture(scope="module")
def shop_task():
    spec = register_catalog("vict-f2", Catalog([TUX, TEE, CHEAP], "test"))
    goal = Goal(asin=TUX.asin, category="fashion", query=TUX.query, name=TUX.title,
                product_category=TUX.product_category,
                instruction_text="a slim fit tuxedo shirt with an elastic waist",
                attributes=("slim fit", "elastic waist"), goal_options=("b-blue", "xx-large"),
                option_names=("color", "size"), price_upper=40.0)
    return goal_tasks([goal], "test", spec)[0]


def _play(env, task, actions):
    obs = env.reset(task)
    observations, snapshots = [obs.text], [env.snapshot()]
    for action in actions:
        obs, _, _, info = env.step(action)
        assert info.valid, f"{action!r} is not admissible"
        observations.append(obs.text)
        snapshots.append(env.snapshot())
    return trace_rollout(env.verifier(task), observations, snapshots, actions)


@pytest.fixture(scope="module")
def group(shop_task):
    env = WebShopEnv()
    traces = [_play(env, shop_task, actions) for actions in GROUP]
    rewards = [[0.0] * (t.num_steps - 1) + [t.v_score] for t in traces]
    batch = CreditBatch.from_lists(rewards, [0] * len(traces), traces=traces,
                                   dtype=torch.float64)
    return batch, compute_credit(batch, VICTConfig())


def _vict(batch, computation, rollout):
    return computation.vict[batch.step_rollout == rollout].tolist()


def _correction(batch, computation, rollout):
    return computation.correction[batch.step_rollout == rollout].tolist()


def test_the_group_scores_as_worked_out_by_hand(group):
    batch, _ = group
    assert [t.v_score for t in batch.traces] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    premature = batch.traces[2].terminal
    assert premature["wrong_purchase"] is Status.VIOL
    assert all(premature[f"option:{o}"] is Status.SAT for o in ("b-blue", "xx-large"))
    assert premature["price_under_budget"] is Status.SAT


def test_table_15_the_premature_buy_is_blamed_and_the_option_clicks_are_not(group):
    batch, computation = group
    # q = −1; every single repair leaves F = 0 (wrong_purchase VIOL or r_type = 0), so all
    # six non-SAT atoms tie and enter; of them only wrong_purchase has δ̂ ≠ 0 (−3.0237).
    # Its witnesses, bound to TEE: the click that opened TEE writes product:asin and title
    # (ω = 1); buy now writes purchased, commits and violates (ω = 3); Z = 4.
    assert computation.rollouts[2].direction == -1
    got = _vict(batch, computation, 2)
    assert got == pytest.approx([0.0, -ONE_OF_8 / 4, 0.0, 0.0, -ONE_OF_8 * 3 / 4])
    corrections = _correction(batch, computation, 2)
    assert corrections[4] < 0 and corrections[4] == min(corrections)
    # The paper marks the option clicks "+". Under SPEC §4.4 they get 0: the options are SAT
    # in a q = −1 rollout, so they are not candidates, and no core atom depends on them.
    assert corrections[2] == corrections[3] == 0.0


def test_table_16_row_4_the_expert_purchase_credits_reveal_writes_and_commit(group):
    batch, computation = group
    # q = +1: product_type and purchase_committed each drop F to 0 alone (Δ = 1 ≥ ρ = 0.375),
    # tie and enter with product_type's SAT descendants: the core is every SAT atom but
    # none of them has a negative δ̂ (price: 5 of 8, δ̂ = 0). Every step writes, reveals
    # or commits one of them.
    for rollout in (0, 1):
        assert computation.rollouts[rollout].direction == 1
        got = _vict(batch, computation, rollout)
        assert all(v > 0 for v in got), got
        # the search step: product_type's only witness there is the results list that showed
        # TUX, half of its reveal weight (the item page's title is the other half); with the
        # click's write (1) and buy now's commit (1), Z = 3
        assert got[0] == pytest.approx(THREE_OF_8 * 0.5 / 3)
        assert all(c > 0 for c in _correction(batch, computation, rollout))


def test_table_16_rows_2_and_3_a_glance_or_a_return_to_search_is_never_blamed(group):
    batch, computation = group
    # GLANCE: core {purchase_committed} (Δ = 0.2 ≥ ρ = 0.125), δ̂ = 0: no correction.
    # BACK_OFF: every repair alone leaves r_type = 0, so all non-SAT atoms enter; each has
    # δ̂ = 0 (the median rollout has none of them either): no correction, unlike PREMATURE's
    # click on the same product.
    for rollout in (3, 4):
        assert computation.rollouts[rollout].outcome == "zero_marginal"
        assert _correction(batch, computation, rollout) == [0.0] * len(GROUP[rollout])
    assert _vict(batch, computation, 2)[1] < 0


def test_a_rollout_that_opened_no_product_has_no_product_witness(group):
    batch, computation = group
    # price_under_budget: 5 of 8 SAT, so SEARCH_ONLY's UNK is δ̂ = −2.0656, but with no
    # product open at the end no step wrote or revealed a product fact: it abstains.
    for rollout in (5, 6, 7):
        assert computation.rollouts[rollout].outcome == "no_edge"
        assert not [e for e in batch.traces[rollout].edges
                    if e.atom_id == "price_under_budget"]
    assert computation.rollouts[5].delta_hat["price_under_budget"] == pytest.approx(-THREE_OF_8)
