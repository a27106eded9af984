import functools
import io
import pickle
import types

import pytest
import torch

from agentcredit.credit import CreditBatch, get_estimator
from agentcredit.credit.vict import VICTConfig
from agentcredit.envs.webshop.catalog import Catalog, generate_catalog
from agentcredit.envs.webshop.engine import WebShopEnv, task_goal
from agentcredit.envs.webshop.options import WebShopConfig
from agentcredit.envs.webshop.shop import open_shop, register_catalog
from agentcredit.envs.webshop.tasks import build_tasks, goal_tasks
from agentcredit.verifier.atoms import Atom, Verifier
from agentcredit.verifier.trace import trace_rollout

from ..envs.webshop.walks import random_actions


def _valid_fields():
    return {
        "group_ids": torch.tensor([7, 7, 3]),
        "step_rollout": torch.tensor([0, 0, 1, 2, 2, 2]),
        "step_index": torch.tensor([0, 1, 0, 0, 1, 2]),
        "step_rewards": torch.tensor([-0.1, 10.0, 0.0, 0.0, -0.1, 0.0]),
        "anchor_keys": ("a", "b", "a", "a", "c", "d"),
    }


def test_from_lists_flattens_ragged_rollouts_in_order():
    batch = CreditBatch.from_lists([[-0.1, 10.0], [0.0], [0.0, -0.1, 0.0]], [7, 7, 3],
                                   [["a", "b"], ["a"], ["a", "c", "d"]])
    expected = _valid_fields()
    assert torch.equal(batch.group_ids, expected["group_ids"])
    assert torch.equal(batch.step_rollout, expected["step_rollout"])
    assert torch.equal(batch.step_index, expected["step_index"])
    assert torch.equal(batch.step_rewards, expected["step_rewards"])
    assert batch.anchor_keys == expected["anchor_keys"]
    assert torch.equal(batch.episode_lengths, torch.tensor([2, 1, 3]))
    assert (batch.num_rollouts, batch.num_steps, batch.num_groups) == (3, 6, 2)


def test_from_lists_flattens_token_scores_step_by_step_in_response_order():
    batch = CreditBatch.from_lists(
        [[0.0, 1.0], [0.0]], [0, 0],
        teacher_logprobs=[[[-1.0, -2.0], [-3.0]], [[-4.0, -5.0, -6.0]]],
        ref_logprobs=[[[-0.1, -0.2], [-0.3]], [[-0.4, -0.5, -0.6]]], update=3)
    tokens = batch.tokens
    assert tokens.token_step.tolist() == [0, 0, 1, 2, 2, 2]
    assert tokens.teacher_logprobs.tolist() == [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]
    assert tokens.ref_logprobs.tolist() == pytest.approx([-0.1, -0.2, -0.3, -0.4, -0.5, -0.6])
    assert tokens.behaviour_logprobs is None and tokens.update == 3


def test_from_lists_takes_hindsight_means_one_per_step():
    batch = CreditBatch.from_lists([[0.0, 1.0], [0.0]], [0, 0],
                                   hindsight_means=[[-0.5, -0.25], [-2.0]],
                                   behaviour_means=[[-1.0, -0.5], [-1.5]])
    assert batch.hindsight.hindsight.tolist() == [-0.5, -0.25, -2.0]
    assert batch.hindsight.behaviour.tolist() == [-1.0, -0.5, -1.5]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"teacher_logprobs": [[[-1.0]]]}, r"teacher_logprobs has \[1\] token lists"),
    ({"teacher_logprobs": [[[-1.0], [-1.0, -2.0]]], "ref_logprobs": [[[-1.0], [-1.0]]]},
     "ref_logprobs must have as many tokens in every step"),
    ({"ref_logprobs": [[[-1.0], [-1.0]]]}, "without teacher_logprobs"),
    ({"teacher_logprobs": [[[-1.0], []]]}, "step 1 has no valid response token"),
    ({"hindsight_means": [[-1.0, -1.0]]}, "hindsight_means and behaviour_means together"),
    ({"hindsight_means": [[-1.0]], "behaviour_means": [[-1.0]]},
     r"hindsight_means has \[1\] values per rollout"),
])
def test_from_lists_rejects_token_and_hindsight_scores_that_do_not_fit_the_steps(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CreditBatch.from_lists([[0.0, 1.0]], [0], **kwargs)


def test_group_index_relabels_arbitrary_group_ids_densely():
    batch = CreditBatch(**_valid_fields())
    assert torch.equal(batch.group_index, torch.tensor([1, 1, 0]))


def test_returns_sum_every_step_reward_including_invalid_action_penalties():
    batch = CreditBatch(**_valid_fields())
    assert torch.allclose(batch.returns, torch.tensor([9.9, 0.0, -0.1]))


def test_from_lists_without_anchor_keys_gives_every_step_its_own_key():
    batch = CreditBatch.from_lists([[0.0, 1.0], [1.0]], [0, 0])
    assert len(set(batch.anchor_keys)) == 3


def test_anchor_keys_given_as_a_list_are_stored_as_a_tuple():
    fields = _valid_fields()
    fields["anchor_keys"] = list(fields["anchor_keys"])
    assert isinstance(CreditBatch(**fields).anchor_keys, tuple)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("group_ids", torch.tensor([7.0, 7.0, 3.0]), "group_ids must be a 1-D int64"),
        ("group_ids", [7, 7, 3], "group_ids must be a 1-D int64 tensor; got list"),
        ("group_ids", torch.zeros(0, dtype=torch.long), "at least one rollout"),
        ("step_rollout", torch.tensor([[0, 0, 1, 2, 2, 2]]), r"step_rollout .*shape \(1, 6\)"),
        ("step_index", torch.tensor([0, 1, 0, 0, 1]), "step_index has length 5"),
        ("step_rewards", torch.tensor([0, 1, 0, 0, 1, 0]), "step_rewards must be a 1-D float"),
        ("step_rewards", torch.tensor([0.0, float("nan"), 0, 0, 0, 0]),
         r"step_rewards\[1\] = nan is not finite"),
        ("anchor_keys", ("a", "b"), "has 2 keys but the batch has 6 steps"),
        ("anchor_keys", ("a", "b", "a", 3, "c", "d"), "must be strings; got int 3"),
        ("step_rollout", torch.tensor([0, 0, 1, 2, 2, 5]), "contains rollout 5, outside 0..2"),
        ("step_rollout", torch.tensor([0, 0, 2, 1, 2, 2]), "decreases at step 3"),
        ("step_rollout", torch.tensor([0, 0, 0, 2, 2, 2]), "rollout 1 has no steps"),
        ("step_index", torch.tensor([0, 1, 0, 0, 2, 1]),
         r"step_index\[4\] = 2 .* step 1 of rollout 2"),
        ("step_index", torch.tensor([1, 2, 0, 0, 1, 2]), r"step_index\[0\] = 1"),
    ],
)
def test_invalid_batch_fails_with_a_message_naming_the_field_and_value(field, value, message):
    fields = _valid_fields()
    fields[field] = value
    with pytest.raises((ValueError, TypeError), match=message):
        CreditBatch(**fields)


def test_from_lists_rejects_a_group_id_count_that_differs_from_the_rollout_count():
    with pytest.raises(ValueError, match="2 reward lists but 3 group ids"):
        CreditBatch.from_lists([[1.0], [0.0]], [0, 0, 1])


def test_from_lists_rejects_anchor_keys_of_the_wrong_length():
    with pytest.raises(ValueError, match="rollout 1 has 2 rewards but 1 anchor keys"):
        CreditBatch.from_lists([[1.0], [0.0, 1.0]], [0, 0], [["a"], ["a"]])


def test_from_lists_rejects_an_empty_rollout():
    with pytest.raises(ValueError, match="rollout 1 has no steps"):
        CreditBatch.from_lists([[1.0], []], [0, 0])


# PLAIN-DATA TRACES: a traced batch pickles without the environment

class _PlainDataPickler(pickle.Pickler):
    """A pickler that refuses what a trace must not carry: any function, lambda, closure or
    method (a predicate, a lambda aggregator), and the live ``Verifier`` or its ``Atom`` s."""

    def reducer_override(self, obj):
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                            functools.partial, Verifier, Atom)):
            name = getattr(getattr(obj, "func", obj), "__qualname__", "")
            raise pickle.PicklingError(f"a trace carries a {type(obj).__name__}"
                                       + (f" ({name})" if name else ""))
        return NotImplemented


def _plain_pickle(obj) -> bytes:
    buffer = io.BytesIO()
    _PlainDataPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def webshop_batches(play):
    """``{products: CreditBatch}``: the same six WebShop goals, each played by the expert and
    three random walks and traced, in the embedded 1,000-product catalogue and in a
    10,000-product one that holds those 1,000 and 9,000 more."""
    small = WebShopConfig()
    goals = [task_goal(t) for t in build_tasks("test", small)[:6]]
    products = open_shop(small.catalog_spec()).catalog.products
    large = Catalog(products + generate_catalog(9000, seed=1).products, "1k + 9k generated")
    env, batches = WebShopEnv(), {}
    for size, spec in ((1000, small.catalog_spec()),
                       (10000, register_catalog("pickle-test-10k", large))):
        traces, groups, rewards = [], [], []
        for g, task in enumerate(goal_tasks(goals, "test", spec)):
            verifier = env.verifier(task)
            for actions in [env.expert(task)] + [random_actions(env, task, seed=s)
                                                 for s in range(3)]:
                texts, states, results = play(env, task, actions)
                traces.append(trace_rollout(verifier, texts, states, actions[:len(results)],
                                            valid=[info.valid for _, _, info in results]))
                groups.append(g)
                rewards.append([0.0] * (len(results) - 1) + [10.0 * traces[-1].v_score])
        batches[size] = CreditBatch.from_lists(rewards, groups, traces=traces)
    return batches


def _credit(batch):
    """Everything ``vict`` returns for ``batch`` but its timings, as plain values."""
    result = get_estimator("vict")(batch, VICTConfig())
    timing = {k for k in result.diagnostics if k.endswith("_ms")}
    return (result.step_advantages.tolist(),
            {k: v.tolist() for k, v in result.extras.items() if torch.is_tensor(v)},
            result.ledger_rows, {k: v for k, v in result.diagnostics.items() if k not in timing})


@pytest.mark.slow
def test_a_traced_webshop_batch_round_trips_through_pickle_with_identical_vict_credit(
        webshop_batches):
    batch = webshop_batches[1000]
    restored = pickle.loads(pickle.dumps(batch))
    assert [t.verifier_id for t in restored.traces] == [f"webshop:{t.task_id}"
                                                        for t in batch.traces]
    credit = _credit(batch)
    assert any(credit[1]["correction"]), "the batch must get some VICT correction to compare"
    assert _credit(restored) == credit


@pytest.mark.slow
def test_traces_hold_no_verifier_and_no_function(webshop_batches):
    for batch in webshop_batches.values():
        _plain_pickle(batch.traces)  # raises PicklingError on a function or a Verifier


#: Measured ≈ 0.77 KB per step (the trace ≈ 0.55 KB: the action, a status row of ≈ 8 atoms,
#: the evidence map, the revealed and mentioned sets and ≈ 2 proof edges with their sources;
#: the rest is the batch's tensors and anchor keys). 1,280 B leaves ~1.6x room for goals with
#: more atoms, yet a batch that carried one catalogue product per step (≈ 0.75 KB pickled;
#: the 1,000-product catalogue pickles to ≈ 0.5 MB) would exceed it.
MAX_PICKLED_BYTES_PER_STEP = 1280


@pytest.mark.slow
def test_a_pickled_batch_grows_with_its_steps_not_with_the_catalogue(webshop_batches):
    # per step: the two catalogues' search results differ, so the walks differ in length
    per_step = {size: len(pickle.dumps(batch)) / batch.num_steps
                for size, batch in webshop_batches.items()}
    assert abs(per_step[10000] - per_step[1000]) < 0.1 * per_step[1000]
    assert max(per_step.values()) < MAX_PICKLED_BYTES_PER_STEP
