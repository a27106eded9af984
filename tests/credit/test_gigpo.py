import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentcredit.credit import CreditBatch
from agentcredit.credit.gigpo import GiGPOConfig, discounted_return_to_go, gigpo

MEAN_NORM = GiGPOConfig(mode="mean_norm")


def test_return_to_go_is_discounted_with_gamma_095_over_variable_length_rollouts():
    batch = CreditBatch.from_lists([[-0.1, 0.0, 10.0], [0.0, -0.1, 0.0, 0.0], [1.0]], [0, 0, 1])
    expected = [
        -0.1 + 0.95 * (0.0 + 0.95 * 10.0), 0.0 + 0.95 * 10.0, 10.0,  # 8.925, 9.5, 10
        0.95 * -0.1, -0.1, 0.0, 0.0,  # a later penalty discounts back to earlier steps
        1.0,
    ]
    assert torch.allclose(discounted_return_to_go(batch, 0.95), torch.tensor(expected))


def test_return_to_go_stays_finite_and_exact_over_fifty_steps():
    batch = CreditBatch.from_lists([[0.0] * 49 + [10.0]], [0])
    rtg = discounted_return_to_go(batch, 0.95)
    assert torch.allclose(rtg, 10.0 * 0.95 ** torch.arange(49, -1, -1.0), rtol=1e-6)


def test_gigpo_adds_the_step_advantage_of_a_shared_anchor_to_the_episode_advantage():
    # both rollouts start in "start"; their second states differ
    batch = CreditBatch.from_lists([[0.0, 10.0], [0.0, 0.0]], [0, 0],
                                   [["start", "kitchen"], ["start", "hall"]])
    result = gigpo(batch, GiGPOConfig())
    episode = 5 / (5 + 1e-6)  # returns 10, 0
    step = 4.75 / (4.75 + 1e-6)  # G("start") = 9.5, 0: mean 4.75, std 4.75
    expected = [episode + step, episode, -episode - step, -episode]  # size-1 groups add 0
    assert torch.allclose(result.step_advantages, torch.tensor(expected))
    assert torch.equal(result.extras["anchor_group_ids"], torch.tensor([0, 1, 0, 2]))
    assert torch.allclose(result.extras["return_to_go"], torch.tensor([9.5, 10.0, 0.0, 0.0]))


def test_gigpo_mean_norm_subtracts_means_at_both_levels():
    batch = CreditBatch.from_lists([[0.0, 10.0], [0.0, 0.0]], [0, 0],
                                   [["start", "kitchen"], ["start", "hall"]])
    adv = gigpo(batch, MEAN_NORM).step_advantages
    assert torch.allclose(adv, torch.tensor([5 + 4.75, 5.0, -5 - 4.75, -5.0]))


def test_gigpo_groups_revisited_states_across_rollouts_of_different_lengths():
    batch = CreditBatch.from_lists(
        [[0.0, 0.0, 10.0], [-0.1, 0.0], [0.0, 0.0, 0.0, 10.0]], [0, 0, 0],
        [["s0", "s1", "s2"], ["s0", "s1"], ["s0", "s3", "s1", "s4"]],
    )
    adv = gigpo(batch, MEAN_NORM).step_advantages
    returns = [10.0, -0.1, 10.0]
    episode = [r - sum(returns) / 3 for r in returns]
    g_s0 = [0.95**2 * 10, -0.1, 0.95**3 * 10]  # G of each rollout's step in state s0
    g_s1 = [0.95 * 10, 0.0, 0.95 * 10]
    step_s0 = [g - sum(g_s0) / 3 for g in g_s0]
    step_s1 = [g - sum(g_s1) / 3 for g in g_s1]
    expected = [
        episode[0] + step_s0[0], episode[0] + step_s1[0], episode[0],  # s2 alone
        episode[1] + step_s0[1], episode[1] + step_s1[1],
        episode[2] + step_s0[2], episode[2], episode[2] + step_s1[2], episode[2],  # s3, s4 alone
    ]
    assert torch.allclose(adv, torch.tensor(expected), atol=1e-5)


def test_gigpo_step_group_of_size_one_adds_nothing_to_the_episode_advantage():
    batch = CreditBatch.from_lists([[0.0, 10.0], [0.0, -0.1, 0.0]], [0, 0],
                                   [["a", "b"], ["c", "d", "e"]])
    for config in (GiGPOConfig(), MEAN_NORM):
        with_steps = gigpo(batch, config).step_advantages
        episode_only = gigpo(batch, GiGPOConfig(mode=config.mode, step_weight=0.0)).step_advantages
        assert torch.equal(with_steps, episode_only)


def test_gigpo_never_joins_equal_anchor_keys_of_different_task_groups():
    keys = [["start", "x"], ["start", "y"]]
    rewards = [[0.0, 10.0], [0.0, 0.0]]
    separate = gigpo(CreditBatch.from_lists(rewards, [0, 1], keys), GiGPOConfig())
    assert separate.extras["anchor_group_ids"][0] != separate.extras["anchor_group_ids"][2]
    assert torch.equal(separate.step_advantages, torch.zeros(4))  # every group has one member
    joined = gigpo(CreditBatch.from_lists(rewards, [0, 0], keys), GiGPOConfig())
    assert joined.extras["anchor_group_ids"][0] == joined.extras["anchor_group_ids"][2]


def test_gigpo_step_weight_scales_only_the_step_level_term():
    batch = CreditBatch.from_lists([[0.0, 10.0], [0.0, 0.0]], [0, 0],
                                   [["start", "kitchen"], ["start", "hall"]])
    half = gigpo(batch, GiGPOConfig(mode="mean_norm", step_weight=0.5)).step_advantages
    assert torch.allclose(half, torch.tensor([5 + 0.5 * 4.75, 5.0, -5 - 0.5 * 4.75, -5.0]))


def test_gigpo_diagnostics_count_step_groups_and_shared_steps():
    batch = CreditBatch.from_lists([[0.0, 10.0], [0.0, 0.0]], [0, 0],
                                   [["start", "kitchen"], ["start", "hall"]])
    diagnostics = gigpo(batch, GiGPOConfig()).diagnostics
    assert diagnostics["num_step_groups"] == 3.0
    assert diagnostics["mean_step_group_size"] == pytest.approx(4 / 3)
    assert diagnostics["shared_anchor_step_share"] == 0.5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"gamma": 1.5}, "gamma = 1.5"), ({"mode": "std"}, "mode = 'std'"),
     ({"eps": -1.0}, "eps = -1.0"), ({"step_weight": float("inf")}, "step_weight = inf")],
)
def test_gigpo_config_rejects_out_of_range_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GiGPOConfig(**kwargs)


_rollouts = st.lists(
    st.tuples(
        st.integers(0, 2),  # task group
        st.lists(st.tuples(st.sampled_from([0.0, -0.1, 1.0, 10.0]), st.sampled_from("abc")),
                 min_size=1, max_size=12),
    ),
    min_size=1, max_size=8,
)


def _batch(rollouts) -> CreditBatch:
    return CreditBatch.from_lists(
        [[r for r, _ in steps] for _, steps in rollouts],
        [g for g, _ in rollouts],
        [[k for _, k in steps] for _, steps in rollouts],
    )


@settings(max_examples=60, deadline=None)
@given(rollouts=_rollouts, gamma=st.floats(0.0, 1.0))
def test_return_to_go_matches_a_backward_recursion(rollouts, gamma):
    rtg = discounted_return_to_go(_batch(rollouts), gamma).tolist()
    expected = []
    for _, steps in rollouts:
        running, backwards = 0.0, []
        for reward, _ in reversed(steps):
            running = reward + gamma * running
            backwards.append(running)
        expected.extend(reversed(backwards))
    assert rtg == pytest.approx(expected, abs=1e-4)


@settings(max_examples=60, deadline=None)
@given(rollouts=_rollouts)
def test_gigpo_mean_norm_step_advantages_sum_to_zero_in_every_step_group(rollouts):
    batch = _batch(rollouts)
    result = gigpo(batch, MEAN_NORM)
    episode_only = gigpo(batch, GiGPOConfig(mode="mean_norm", step_weight=0.0))
    step_adv = (result.step_advantages - episode_only.step_advantages).double()
    ids = result.extras["anchor_group_ids"]
    sums = torch.zeros(int(ids.max()) + 1, dtype=torch.float64).index_add_(0, ids, step_adv)
    assert torch.allclose(sums, torch.zeros_like(sums), atol=1e-4)
    assert sorted(set(ids.tolist())) == list(range(int(ids.max()) + 1))  # dense ids
