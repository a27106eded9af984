"""Worked examples from the VICT paper's WebShop case study (appendix F.2, Tables 15 and 16),
on a three-product shop whose reward terms are worked out by hand from ``reward.py``'s
formula (docs/vict.md §4.1, §4.4-4.6), not read off the pipeline.

Goal: a "Velora Tuxedo Shirt Men Polyester Cotton" (title nouns velora, tuxedo, shirt, men,
polyester, cotton), attributes slim fit and elastic waist, options b-blue and xx-large,
price under 40. Products:

- ``TUX`` the target: every term matches, reward 1;
- ``TEE`` "Jspoyou Tees Short Sleeve Summer": no title noun in common (``title_score = 0``,
  ``r_type = 0``), in the requested colour and size and cheap: buying it is the paper's
  premature purchase, ``wrong_purchase`` VIOL, reward 0;
- ``CHEAP`` "Kortix Tuxedo Shirt": 2 of 6 nouns (``title_score = 1/3 > 0.2``, ``r_type = 1``),
  no requested attribute, price 5.

Rollouts: ``EXPERT`` (Table 16, row 4): search, open TUX, b-blue, xx-large, buy;
``PREMATURE`` (Table 15; Table 16, row 1): search, open TEE, b-blue, xx-large, buy;
``GLANCE`` (Table 16, row 2): search, open CHEAP, stop; ``BACK_OFF`` (Table 16, row 3): search,
open TEE, back to search, stop; ``SEARCH_ONLY``: search, then stop.

The dependencies Table 15 needs (docs/vict.md §4.1, WebShop): the option and price atoms
depend on nothing (the paper's failed purchase has ``color_option_selected=sat`` as a
direct write ``+`` while ``product_type`` is UNSAT, so a dependency on the type would void
the write); ``purchase_committed`` and ``wrong_purchase`` depend on them (the purchase
commits the selection: a failure's core pulls the SAT selection in as the ancestors of the
violated purchase, as ALFWorld's premature placement pulls in the held object).

Witnesses of ``PREMATURE`` (all bound to TEE), with ``Z`` the sum of each atom's weights:

| step | action | product_type (Z 3) | option:* (Z 4 each) | price (Z 3) | wrong_purchase (Z 3) |
| --- | --- | --- | --- | --- | --- |
| 0 | search | reveal 1/2 (lists TEE) | support 1/2 (enables the click) | reveal 1/2 | - |
| 1 | click TEE | write 1 + reveal 1/2 | write 1 (asin) + reveal 1/2 | write 1 + reveal 1/2 | - |
| 2, 3 | option clicks | - | write 1 (its own option) | - | - |
| 4 | buy now | commit 1 | commit 1 | commit 1 | write + commit + violation 3 |

(``wrong_purchase``'s write at the click on TEE and its support at the search are not
valid: the selection it depends on is not SAT until the option clicks; the attribute and
title atoms' edges are not valid while ``product_type`` is UNSAT.)
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

from ...played import played_states

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
#: the median reading's group (two experts; hand-worked numbers below)
GROUP = (EXPERT, EXPERT, PREMATURE, GLANCE, BACK_OFF, SEARCH_ONLY, SEARCH_ONLY, SEARCH_ONLY)
#: the failures a group of ``k`` experts takes its ``8 − k`` others from, in order
FAILURES = (PREMATURE, GLANCE, BACK_OFF) + (SEARCH_ONLY,) * 4

#: raw atom values δ at the end of each rollout (1 = SAT, 0 = UNSAT/UNK, −1 = VIOL; the
#: graded product_type carries r_type), worked out from the products above
VALUES = {
    EXPERT: {"product_type": 1, "option": 1, "price": 1, "wrong_purchase": 0},
    PREMATURE: {"product_type": 0, "option": 1, "price": 1, "wrong_purchase": -1},
    GLANCE: {"product_type": 1, "option": 0, "price": 1, "wrong_purchase": 0},  # CHEAP: r_type 1
    BACK_OFF: {"product_type": 0, "option": 0, "price": 1, "wrong_purchase": 0},  # TEE open
    SEARCH_ONLY: {"product_type": 0, "option": 0, "price": 0, "wrong_purchase": 0},
}


def composition(successes: int) -> tuple[tuple[str, ...], ...]:
    return (EXPERT,) * successes + FAILURES[:8 - successes]


def mean_hat(rollouts, rollout, atom: str) -> float:
    """δ̂ by hand under mean centring (docs/vict.md §4.5): ``(δ − mean) / (std + ε)``, 0 for
    an atom the whole group shares."""
    values = [VALUES[r][atom] for r in rollouts]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return 0.0 if std == 0 else (VALUES[rollout][atom] - mean) / (std + EPS)


@pytest.fixture(scope="module")
def shop_task():
    spec = register_catalog("vict-f2", Catalog([TUX, TEE, CHEAP], "test"))
    goal = Goal(asin=TUX.asin, category="fashion", query=TUX.query, name=TUX.title,
                product_category=TUX.product_category,
                instruction_text="a slim fit tuxedo shirt with an elastic waist",
                attributes=("slim fit", "elastic waist"), goal_options=("b-blue", "xx-large"),
                option_names=("color", "size"), price_upper=40.0)
    return goal_tasks([goal], "test", spec)[0]


@pytest.fixture(scope="module")
def play(shop_task):
    """``play(actions) -> RolloutTrace``, with the admissible sets the collector records."""
    env, cache = WebShopEnv(), {}

    def run(actions):
        if actions not in cache:
            cache[actions] = played_states(env, shop_task, actions).trace(
                env.verifier(shop_task), actions)
        return cache[actions]

    return run


def _credit(play, rollouts, config):
    traces = [play(actions) for actions in rollouts]
    rewards = [[0.0] * (t.num_steps - 1) + [t.v_score] for t in traces]
    batch = CreditBatch.from_lists(rewards, [0] * len(traces), traces=traces,
                                   dtype=torch.float64)
    return batch, compute_credit(batch, config)


@pytest.fixture(scope="module")
def group(play):
    """The median reading (the paper's literal ``med``) on ``GROUP``."""
    return _credit(play, GROUP, VICTConfig(centre="median"))


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


def test_the_click_on_a_product_supports_the_option_clicks_and_the_search_supports_the_click(
        play):
    # docs/vict.md §4.3: clicking a product makes its option clicks and buy now admissible,
    # but that click already writes every product atom (it changes product:asin), so it is
    # their witness, not their support; the search, which made the click possible, is the
    # support of the click's writes, and of nothing the click did not write
    edges = play(PREMATURE).edges
    support = {(e.step, e.atom_id) for e in edges if e.relation == "support" and e.valid}
    assert support == {(0, "option:b-blue"), (0, "option:xx-large")}
    assert not [e for e in edges if e.relation == "support" and e.step > 0 and e.valid]
    assert all(e.source == "enables:click[b0teeshir1]" for e in edges
               if e.relation == "support" and e.valid)


def test_table_15_median_reading_the_options_are_credited_and_buy_now_is_blamed(group):
    batch, computation = group
    # Median reading (3 of 8 at 1 → median 0, MAD 0, std √15/8: δ̂ of a 1 = 2.0656; 5 of 8
    # → median 1; 1 of 8 at −1 → −3.0237): options +2.0656 each (EXPERT ×2 and PREMATURE
    # selected them), product_type 0 (PREMATURE's 0 is the median), price 0 (its 1 is the
    # median), wrong_purchase −3.0237. q = −1; every single repair leaves F = 0, so every
    # non-SAT atom enters with its ancestors: wrong_purchase pulls in the SAT selection.
    assert computation.rollouts[2].direction == -1
    got = _vict(batch, computation, 2)
    option = THREE_OF_8 / 4  # an option atom's δ̂ per unit of weight, Z = 4 (module table)
    assert got == pytest.approx([2 * option / 2, 2 * option * 1.5, option, option,
                                 -ONE_OF_8 + 2 * option])
    corrections = _correction(batch, computation, 2)
    assert corrections[2] > 0 and corrections[3] > 0
    assert corrections[4] < 0 and corrections[4] == min(corrections)


def test_table_16_row_4_median_reading_the_expert_purchase_credits_every_step(group):
    batch, computation = group
    # q = +1: product_type, purchase_committed and (through purchase_committed) each option
    # and the price drop F to 0 alone: they tie and enter with their SAT descendants, none
    # with a negative δ̂ (price: 5 of 8, δ̂ = 0). Every step writes, reveals, supports or
    # commits one of them.
    for rollout in (0, 1):
        assert computation.rollouts[rollout].direction == 1
        assert all(v > 0 for v in _vict(batch, computation, rollout))
        assert all(c > 0 for c in _correction(batch, computation, rollout))


def test_table_16_rows_2_and_3_median_reading_a_glance_or_a_return_to_search_is_not_blamed(
        group):
    batch, computation = group
    # GLANCE: core {purchase_committed} and its SAT ancestor price; δ̂ = 0 (5 of 8 and
    # 3 of 8 under the median): no correction. BACK_OFF: every non-SAT atom has δ̂ = 0 (the
    # median rollout has none of them either): no correction, unlike PREMATURE's buy.
    for rollout in (3, 4):
        assert computation.rollouts[rollout].outcome == "zero_marginal"
        assert _correction(batch, computation, rollout) == [0.0] * len(GROUP[rollout])
    assert _vict(batch, computation, 2)[4] < 0


def test_median_reading_a_rollout_that_opened_no_product_has_no_product_witness(group):
    batch, computation = group
    # price_under_budget: 5 of 8 SAT, so SEARCH_ONLY's UNK is δ̂ = −2.0656, but with no
    # product open at the end no step wrote or revealed a product fact: it abstains.
    for rollout in (5, 6, 7):
        assert computation.rollouts[rollout].outcome == "no_edge"
        assert not [e for e in batch.traces[rollout].edges
                    if e.atom_id == "price_under_budget"]
    assert computation.rollouts[5].delta_hat["price_under_budget"] == pytest.approx(-THREE_OF_8)


# THE PAPER'S F.2 UNDER THE DEFAULT (mean centring), GROUPS OF 8 WITH 1, 4, 5 AND 7 SUCCESSES

@pytest.mark.parametrize("successes", [1, 4, 5, 7])
def test_table_15_option_clicks_plus_and_buy_now_minus_in_one_failed_purchase(play, successes):
    rollouts = composition(successes)
    batch, computation = _credit(play, rollouts, VICTConfig())
    i = successes  # PREMATURE comes right after the experts
    assert rollouts[i] == PREMATURE and computation.rollouts[i].direction == -1
    got = _vict(batch, computation, i)
    option = mean_hat(rollouts, PREMATURE, "option")
    product = mean_hat(rollouts, PREMATURE, "product_type")
    price = mean_hat(rollouts, PREMATURE, "price")
    wrong = mean_hat(rollouts, PREMATURE, "wrong_purchase")
    assert wrong == pytest.approx(-math.sqrt(7), rel=1e-5) and product < 0
    # steps 3-4 of Table 15 (click[b-blue], click[xx-large]): direct writes, "+": the option
    # atom's δ̂ over Z = 4. With 7 successes all 8 rollouts selected both options (EXPERT ×7
    # and PREMATURE): the group shares the atom, δ̂ = 0, and the clicks can only get 0.
    assert got[2] == got[3] == pytest.approx(option / 4)
    if successes < 7:
        assert option > 0 and got[2] > 0
    else:
        assert got[2] == 0.0
    # step 5 (click[buy now]): commit violation, "−": wrong_purchase's full −√7 outweighs
    # whatever the selection's commits give back (at most 2·√3/4 + 1/3 for k = 1)
    assert got[4] == pytest.approx(wrong + product / 3 + 2 * option / 4 + price / 3)
    assert got[4] < 0 and got[4] == min(got)
    # step 2 (click[b09q67h373]): evidence reveal, "+/−": writes and reveals the failed type
    # (−) and the selection's product (options, price: + while not shared)
    assert got[1] == pytest.approx(product * 1.5 / 3 + 2 * option * 1.5 / 4 + price * 1.5 / 3)
    # step 1 (the search): the paper's "+" rests on query atoms ("query covers several hard
    # constraints") that WebShop's reward has no term for; here the search reveals the
    # product it listed (TEE: its failed type −, its price +) and supports the option
    # writes of the click it enabled, so its sign follows the composition: + with 1 or 4
    # successes, − with 5 or 7 (price and, at 7, the options shared by the whole group)
    assert got[0] == pytest.approx(product * 0.5 / 3 + 2 * option * 0.5 / 4 + price * 0.5 / 3)
    assert (got[0] > 0) == (successes < 5)


@pytest.mark.parametrize("successes", [1, 4, 5, 7])
def test_table_16_row_4_the_expert_purchase_is_credited_in_every_composition(play, successes):
    rollouts = composition(successes)
    batch, computation = _credit(play, rollouts, VICTConfig())
    option = mean_hat(rollouts, EXPERT, "option")
    for i in range(successes):
        assert computation.rollouts[i].direction == 1
        got = _vict(batch, computation, i)
        # reveal (search, product click) and commit (buy now) "+": product_type is SAT in
        # every expert and UNSAT in PREMATURE, so its δ̂ > 0 in every composition
        assert got[0] > 0 and got[1] > 0 and got[4] > 0
        # option writes "+", except with 7 successes: all 8 selected them (shared, δ̂ = 0)
        assert got[2] == got[3] == pytest.approx(option / 4)
        assert (got[2] > 0) == (successes < 7)


@pytest.mark.parametrize("successes", [1, 4, 5])
def test_table_16_row_3_returning_to_search_from_the_wrong_product_is_not_blamed_for_a_buy(
        play, successes):
    rollouts = composition(successes)
    batch, computation = _credit(play, rollouts, VICTConfig())
    i = rollouts.index(BACK_OFF)
    # BACK_OFF bought nothing: no wrong_purchase VIOL, so its back-to-search click carries no
    # purchase blame; its only product witnesses are the search and the click on TEE
    got = _vict(batch, computation, i)
    assert got[2] == 0.0
