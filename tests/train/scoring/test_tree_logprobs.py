"""Prefix trees compute what the rows compute (train/scoring/tree_logprobs.py, docs/backbones.md
§0.1): log-probs, entropies and gradients of real step prompts, tree against row."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from agentcredit.config import OptimConfig, TinyModelConfig
from agentcredit.envs.base import Task
from agentcredit.rollout.admissible import ActionTrie
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.skills import SkillProvider, SkillSplicer
from agentcredit.train import prefix_tree
from agentcredit.train.model_loading import load_policy
from agentcredit.train.ppo import PPOBatch, ppo_update
from agentcredit.train.prefix_tree import step_trees
from agentcredit.train.scoring import teacher as teacher_module
from agentcredit.train.scoring.logprobs import token_logprobs, token_logprobs_and_entropy
from agentcredit.train.scoring.teacher import privileged_logprobs
from agentcredit.train.scoring.tree_logprobs import tree_logprobs
from agentcredit.train.step_tensors import StepTensors, tensorize_steps
from agentcredit.train.warm_start.sft import Demonstration, demonstration_steps, sft_backward
from agentcredit.train.warm_start.tiny_model import bootstrap_tiny_model

ACTIONS = ["go to countertop 1", "take egg 1 from countertop 2", "heat egg 1 with microwave 1",
           "open fridge 1", "examine countertop 1"]
OBSERVATIONS = [f"You arrive at countertop {k}. On it, you see a egg {k}." for k in range(6)]
TASK = Task(task_id="t0", env="alfworld", split="train", task_type="pick_heat_then_place",
            instruction="heat some egg and put it in countertop.")


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    """A tiny model whose context matters (large initial weights) and its tokenizer."""
    corpus = ([TASK.instruction, *OBSERVATIONS, *ACTIONS, "Nothing happens."] * 3
              + SkillProvider().corpus("alfworld"))
    config = TinyModelConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=1, intermediate_size=64,
                             max_position_embeddings=4096, initializer_range=0.2, seed=0)
    return load_policy(str(bootstrap_tiny_model(corpus, tmp_path_factory.mktemp("tree"), config)))


def _trajectory(tokenizer, prompt: PromptConfig, steps: int, seed: int,
                admissible: bool = False) -> Trajectory:
    """A rollout of ``steps`` steps whose prompts ``build_prompt_ids`` renders from its history."""
    traj = Trajectory(task=TASK, group_id=0)
    history: list[tuple[str, str]] = []
    for t in range(steps):
        observation = OBSERVATIONS[(t + seed) % len(OBSERVATIONS)]
        action = ACTIONS[(3 * t + seed) % len(ACTIONS)]
        response_ids = tokenizer.encode(action, add_special_tokens=False) + [tokenizer.eos_token_id]
        allowed = (ActionTrie.from_commands(tokenizer, ACTIONS, "bare").allowed_along(response_ids)
                   if admissible else None)
        traj.steps.append(Step(
            observation=observation, response=action, action=action, valid=True, reward=0.0,
            anchor_key=observation, snapshot={},
            prompt_ids=build_prompt_ids(tokenizer, TASK.instruction, history, observation,
                                        ACTIONS, prompt),
            response_ids=response_ids, sampling_logprobs=[0.0] * len(response_ids),
            allowed_ids=allowed))
        history.append((observation, action))
    return traj


COMPACT = PromptConfig(history_window=30, history_style="compact")
CASES = {
    # the whole episode in the prompt: each step shares the previous one's history
    "shared history": (COMPACT, 6),
    # a window of 2 slides from step 3 on
    "slid window": (PromptConfig(history_window=2), 6),
    # prompts cut to 180 tokens drop their oldest lines
    "truncated": (dataclasses.replace(COMPACT, max_prompt_tokens=180), 7),
    # step 0 alone, without history
    "first step": (COMPACT, 1),
}


def _steps(tokenizer, case: str, admissible: bool = False) -> StepTensors:
    prompt, length = CASES[case]
    return tensorize_steps([_trajectory(tokenizer, prompt, length, seed, admissible)
                            for seed in range(3)], tokenizer.pad_token_id)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("admissible", [False, True])
def test_tree_logprobs_and_entropies_equal_the_rows(policy, case, admissible):
    model, tokenizer = policy
    steps = _steps(tokenizer, case, admissible)
    expected, entropy = token_logprobs_and_entropy(model, steps.input_ids, steps.attention_mask,
                                                   4, allowed=steps.allowed,
                                                   score_mask=steps.loss_mask, temperature=0.7)
    trees = step_trees(steps.input_ids, steps.attention_mask, steps.loss_mask,
                       steps.step_rollout)
    assert sorted(int(r) for t in trees for r in t.rows) == list(range(len(steps.input_ids)))
    got, got_entropy = torch.zeros_like(expected), torch.zeros_like(expected)
    for tree in trees:
        lp, ent = tree_logprobs(model, tree, steps.input_ids, steps.attention_mask,
                                steps.loss_mask, branch_batch=2, with_entropy=True,
                                allowed=steps.allowed, temperature=0.7)
        got[tree.rows, :lp.shape[1]] = lp
        got_entropy[tree.rows, :ent.shape[1]] = ent
    # every free token has a log-prob; under admissible decoding a forced token's is 0
    scored = expected[steps.loss_mask] != 0
    assert bool(scored.any() if admissible else scored.all())
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(got_entropy, entropy, atol=1e-5, rtol=0)
    lengths = steps.attention_mask.sum(1)
    computed = sum(tree.tokens(lengths) for tree in trees)
    if case == "shared history":  # each step departs after the history its prompt adds
        assert len(trees) == 3
        assert all(bool((tree.attach.diff() > 0).all()) for tree in trees)
        assert computed < 0.7 * int(lengths.sum())


def test_the_trees_save_only_where_prompts_share_a_prefix(policy):
    _, tokenizer = policy
    steps = _steps(tokenizer, "slid window")
    trees = step_trees(steps.input_ids, steps.attention_mask, steps.loss_mask, steps.step_rollout)
    lengths = steps.attention_mask.sum(1)
    shared = _steps(tokenizer, "shared history")
    shared_trees = step_trees(shared.input_ids, shared.attention_mask, shared.loss_mask,
                              shared.step_rollout)
    saved = 1 - sum(t.tokens(lengths) for t in trees) / int(lengths.sum())
    shared_lengths = shared.attention_mask.sum(1)
    shared_saved = 1 - (sum(t.tokens(shared_lengths) for t in shared_trees)
                        / int(shared_lengths.sum()))
    assert 0 <= saved < shared_saved


def test_the_gradient_of_a_tree_equals_the_rows_gradient(policy):
    """One backward through the trunk collects what every branch batch sent it."""
    model, tokenizer = policy
    steps = _steps(tokenizer, "shared history", admissible=True)
    weights = torch.rand(steps.input_ids.shape, generator=torch.Generator().manual_seed(0))
    model = copy.deepcopy(model).train()
    logprobs = token_logprobs(model, steps.input_ids, steps.attention_mask, 32,
                              requires_grad=True, allowed=steps.allowed,
                              score_mask=steps.loss_mask, temperature=0.7)
    (logprobs * weights).sum().backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    for tree in step_trees(steps.input_ids, steps.attention_mask, steps.loss_mask,
                           steps.step_rollout):
        tree_logprobs(model, tree, steps.input_ids, steps.attention_mask, steps.loss_mask,
                      branch_batch=2, allowed=steps.allowed, temperature=0.7,
                      loss=lambda rows, lp, _ent: (lp * weights[rows, :lp.shape[1]]).sum())
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], rtol=1e-5,
                                   atol=1e-5 * float(expected[name].abs().max()), msg=name)


def test_a_ppo_update_on_trees_moves_the_weights_as_on_rows(policy):
    """One mini-batch (the same rows either way): the same loss, so the same step."""
    model, tokenizer = policy
    steps = _steps(tokenizer, "shared history", admissible=True)
    advantages = torch.randn(steps.input_ids.shape[0], generator=torch.Generator().manual_seed(1))
    advantages = advantages[:, None] * steps.loss_mask.float()
    old = token_logprobs(model, steps.input_ids, steps.attention_mask, 32,
                         allowed=steps.allowed, score_mask=steps.loss_mask, temperature=0.7)
    moved = {}
    for layout in ("trees", "rows"):
        trained = copy.deepcopy(model)
        optimizer = torch.optim.SGD(trained.parameters(), lr=0.1)
        stats = ppo_update(trained, optimizer, PPOBatch(steps, old - 0.05, advantages),
                           OptimConfig(kl_coef=0.0, mini_batches=1, micro_batch_size=3,
                                       entropy_coef=0.01, layout=layout),
                           torch.Generator().manual_seed(0), temperature=0.7)
        moved[layout] = ({name: p - model.state_dict()[name]
                          for name, p in trained.state_dict().items()}, stats)
    # the steps agree to the float32 rounding of the weights they were added to (3e-8 on
    # steps of up to 2e-2)
    for name, delta in moved["rows"][0].items():
        torch.testing.assert_close(moved["trees"][0][name], delta, rtol=1e-4,
                                   atol=1e-4 * float(delta.abs().max()), msg=name)
    for key, value in moved["rows"][1].items():
        assert moved["trees"][1][key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


def test_a_skill_prefixed_teacher_row_scores_the_same_as_a_tree(policy):
    model, tokenizer = policy
    steps = _steps(tokenizer, "shared history", admissible=True)
    splicer = SkillSplicer(tokenizer)
    skills = [SkillProvider().skill_text(TASK)] * steps.input_ids.shape[0]
    common = {"micro_batch_size": 3, "allowed": steps.allowed, "temperature": 0.7}
    rows = privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask,
                               steps.loss_mask, skills, reuse_prefix=False, **common)
    trees = privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask,
                                steps.loss_mask, skills, groups=steps.step_rollout, **common)
    assert bool((rows[steps.loss_mask] != 0).any())
    torch.testing.assert_close(trees, rows, atol=1e-5, rtol=0)


def test_sft_on_a_recovery_sample_takes_the_rows_gradient(policy):
    """A recovery sample branches off its step's history with wrong actions: the SFT loss's
    gradient over the tree equals the rows'."""
    model, tokenizer = policy
    demo = Demonstration(task=TASK, observations=OBSERVATIONS[:4],
                         admissible=[(action, ACTIONS[4]) for action in ACTIONS[:4]],
                         actions=ACTIONS[:4], won=True,
                         invalid_observation="Nothing happens.")
    (traj,) = demonstration_steps([demo], tokenizer, COMPACT, recovery=1.0, seed=0)
    assert len(traj.steps) == 8  # every step and its recovery sample
    data = tensorize_steps([traj], tokenizer.pad_token_id)
    model = copy.deepcopy(model).train()
    rows = torch.arange(data.input_ids.shape[0])
    value = sft_backward(model, data, rows, branch_batch=3)
    tree_grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    logprobs = token_logprobs(model, data.input_ids, data.attention_mask, 16, requires_grad=True,
                              score_mask=data.loss_mask)
    loss = -(logprobs * data.loss_mask).sum() / data.loss_mask.sum()
    loss.backward()
    assert value == pytest.approx(float(loss), rel=1e-5)
    for name, p in model.named_parameters():
        torch.testing.assert_close(tree_grads[name], p.grad, rtol=1e-5,
                                   atol=1e-5 * float(p.grad.abs().max()), msg=name)
    trees = step_trees(data.input_ids, data.attention_mask, data.loss_mask, data.step_rollout)
    assert any(tree.trunk_len for tree in trees)


def test_rows_are_the_layout_when_the_model_cannot_take_trees(policy, monkeypatch):
    model, tokenizer = policy
    steps = _steps(tokenizer, "shared history")
    monkeypatch.setattr(model.config, "use_sliding_window", True)
    (tree,) = prefix_tree.layout_trees(model, steps, "trees")
    assert tree.trunk_len == 0 and len(tree.rows) == steps.input_ids.shape[0]




def test_a_rollout_without_gradient_is_not_run_as_a_tree_and_the_update_is_unchanged(policy):
    model, tokenizer = policy
    steps = _steps(tokenizer, "shared history")  # 3 rollouts of 6 steps
    advantages = torch.tensor([1.0] * 6 + [0.0] * 6 + [-1.0] * 6)[:, None] * steps.loss_mask
    old = token_logprobs(model, steps.input_ids, steps.attention_mask, 32,
                         score_mask=steps.loss_mask)
    config = OptimConfig(kl_coef=0.0, mini_batches=1, micro_batch_size=3)
    moved = []
    for settings in (config, dataclasses.replace(config, entropy_coef=1e-30)):
        trained, forwards = copy.deepcopy(model), []
        hook = trained.register_forward_hook(lambda _m, _a, _o, seen=forwards: seen.append(1))
        stats = ppo_update(trained, torch.optim.SGD(trained.parameters(), lr=0.1),
                           PPOBatch(steps, old, advantages), settings, torch.Generator())
        hook.remove()
        moved.append((trained.state_dict(), stats, len(forwards)))
    (skipped, stats, forwards), (ran_all, _, forwards_all) = moved
    # two trees of 6 rows: a trunk and two branch batches of 3 each; all three with the bonus
    assert (forwards, forwards_all) == (6, 9)
    assert stats["ppo/trained_rows"] == pytest.approx(12 / 18)
    for name, weight in ran_all.items():
        torch.testing.assert_close(skipped[name], weight, atol=1e-6, rtol=0, msg=name)


@pytest.mark.parametrize(("rollouts", "length", "cache_used"), [(1, 8, False), (3, 1, True)])
def test_the_teacher_runs_whichever_of_trees_and_the_task_cache_computes_fewer_tokens(
        policy, monkeypatch, rollouts, length, cache_used):
    """One rollout with a long shared history: trees; one step in each of three rollouts of
    one task (nothing shared within a rollout, the skill shared by the task): the cache."""
    model, tokenizer = policy
    steps = tensorize_steps([_trajectory(tokenizer, COMPACT, length, seed)
                             for seed in range(rollouts)], tokenizer.pad_token_id)
    used = []
    score_rows = teacher_module._score_rows
    monkeypatch.setattr(teacher_module, "_score_rows",
                        lambda *args, **kwargs: used.append(1) or score_rows(*args, **kwargs))
    skills = [SkillProvider().skill_text(TASK)] * steps.input_ids.shape[0]
    got = privileged_logprobs(model, SkillSplicer(tokenizer), steps.input_ids,
                              steps.attention_mask, steps.loss_mask, skills, micro_batch_size=3,
                              groups=steps.step_rollout)
    assert bool(used) == cache_used
    assert bool((got[steps.loss_mask] != 0).all())
