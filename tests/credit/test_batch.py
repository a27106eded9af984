import pytest
import torch

from agentcredit.credit import CreditBatch


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
        ("step_index", torch.tensor([0, 1, 0, 0, 2, 1]), r"step_index\[4\] = 2 .* step 1 of rollout 2"),
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
