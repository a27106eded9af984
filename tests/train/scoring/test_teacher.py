"""Privileged rescoring (docs/adrs.md §5.1) and the probe token classes (docs/adrs.md §5.5)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from agentcredit.config import TinyModelConfig
from agentcredit.envs.base import Task
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.skills import SkillProvider, SkillSplicer
from agentcredit.train.evaluation.probes import (
    ACTION,
    OBJECT,
    OTHER,
    probe_token_gap,
    response_token_classes,
)
from agentcredit.train.model_loading import load_policy
from agentcredit.train.scoring.teacher import privileged_logprobs
from agentcredit.train.step_tensors import tensorize_steps
from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model

from ...row_oracle import row_logprobs

TASK_TYPES = ("pick_heat_then_place", "pick_and_place", "look_at_obj_in_light")
ACTIONS = ["go to countertop 1", "take egg 1 from countertop 2", "heat egg 1 with microwave 1",
           "move egg 1 to countertop 1", "open fridge 1", "use desklamp 1"]


@pytest.fixture(scope="module")
def teacher_model_dir(tmp_path_factory) -> Path:
    """A tiny model whose tokenizer knows the skill texts; large init so context changes scores."""
    corpus = (["Your task is to: heat some egg and put it in countertop.",
               "You arrive at countertop 1. On the countertop 1, you see a egg 1."] + ACTIONS) * 3
    corpus += SkillProvider().corpus("alfworld")
    config = TinyModelConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=1, intermediate_size=64,
                             max_position_embeddings=2048, initializer_range=0.2, seed=0)
    return bootstrap_tiny_model(corpus, tmp_path_factory.mktemp("teacher"), config)


@pytest.fixture(scope="module")
def policy(teacher_model_dir):
    return load_policy(str(teacher_model_dir))


def make_trajectories(tokenizer, groups: int = 3, rollouts: int = 2) -> list[Trajectory]:
    """``groups`` tasks × ``rollouts`` rollouts of 1–3 steps with varied prompts and responses."""
    trajectories = []
    for g in range(groups):
        task = Task(task_id=f"task{g}", env="alfworld", split="train",
                    instruction="heat some egg and put it in countertop.",
                    task_type=TASK_TYPES[g % len(TASK_TYPES)])
        for r in range(rollouts):
            steps, history = [], []
            for t in range(1 + (g + r) % 3):
                observation = f"You arrive at countertop {t + r}."
                prompt = build_prompt_ids(tokenizer, task.instruction, history, observation,
                                          ACTIONS[:3], PromptConfig())
                action = ACTIONS[(g + r + t) % len(ACTIONS)]
                response = tokenizer.encode(action, add_special_tokens=False) + \
                    [tokenizer.eos_token_id]
                steps.append(Step(observation=observation, response=action, action=action,
                                  valid=True, reward=0.0, anchor_key=observation, snapshot={},
                                  prompt_ids=prompt, response_ids=response,
                                  sampling_logprobs=[-1.0] * len(response)))
                history.append((observation, action))
            trajectories.append(Trajectory(task=task, group_id=g, steps=steps))
    return trajectories


@pytest.fixture(scope="module")
def batch(policy):
    _, tokenizer = policy
    trajectories = make_trajectories(tokenizer)
    steps = tensorize_steps(trajectories, tokenizer.pad_token_id)
    provider = SkillProvider()
    skills = [provider.skill_text(t.task) for t in trajectories for _ in t.steps]
    return steps, skills


def teacher(policy, batch, **kwargs):
    model, tokenizer = policy
    steps, skills = batch
    kwargs.setdefault("micro_batch_size", 3)
    return privileged_logprobs(model, SkillSplicer(tokenizer), steps.input_ids,
                               steps.attention_mask, steps.loss_mask, skills, **kwargs)


def test_the_shared_head_and_trees_equal_rows(policy, batch):
    steps, _ = batch
    trees = teacher(policy, batch, groups=steps.step_rollout)
    rows = teacher(policy, batch, micro_batch_size=2)
    assert torch.allclose(trees, rows, atol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
@pytest.mark.parametrize("trees", [True, False])
def test_teacher_scores_equal_ordinary_scoring_of_the_spliced_sequences(policy, batch,
                                                                       temperature, trees):
    model, tokenizer = policy
    steps, skills = batch
    splicer = SkillSplicer(tokenizer)
    scores = teacher(policy, batch, temperature=temperature,
                     groups=steps.step_rollout if trees else None)
    for row in range(0, steps.input_ids.shape[0], 3):
        response = steps.loss_mask[row].nonzero().flatten()
        first, last = int(response[0]), int(response[-1])
        prompt = steps.input_ids[row, :first].tolist()
        sequence = splicer.privileged_prompt_ids(prompt, skills[row]) + \
            steps.input_ids[row, first:last + 1].tolist()
        expected = row_logprobs(model, torch.tensor([sequence]),
                                torch.ones(1, len(sequence), dtype=torch.long),
                                temperature=temperature)[0][0]
        assert torch.allclose(scores[row, first:last + 1], expected[-(last + 1 - first):],
                              atol=1e-4)


def test_the_skill_changes_the_scores_so_the_comparison_above_is_not_vacuous(policy, batch):
    model, _ = policy
    steps, _ = batch
    ordinary, _ = row_logprobs(model, steps.input_ids, steps.attention_mask)
    gap = (teacher(policy, batch) - ordinary)[steps.loss_mask].abs()
    assert gap.max() > 1e-2


def test_scores_do_not_depend_on_the_micro_batch_size(policy, batch):
    assert torch.allclose(teacher(policy, batch, micro_batch_size=1),
                          teacher(policy, batch, micro_batch_size=16), atol=1e-5)


def test_only_response_tokens_get_scores(policy, batch):
    steps, _ = batch
    scores = teacher(policy, batch)
    assert (scores[~steps.loss_mask] == 0).all()
    assert (scores[steps.loss_mask] < 0).all()


def test_teacher_pass_leaves_weights_unchanged_runs_without_grad_and_restores_the_mode(policy,
                                                                                       batch):
    model, _ = policy
    before = {name: p.detach().clone() for name, p in model.state_dict().items()}
    grad_enabled = []
    hook = model.register_forward_hook(lambda *_: grad_enabled.append(torch.is_grad_enabled()))
    model.train()
    try:
        scores = teacher(policy, batch)
    finally:
        hook.remove()
        was_training = model.training
        model.eval()
    assert grad_enabled and not any(grad_enabled)
    assert not scores.requires_grad and was_training
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[name], p) for name, p in model.state_dict().items())


def test_one_skill_per_row_is_required(policy, batch):
    model, tokenizer = policy
    steps, skills = batch
    with pytest.raises(ValueError, match="skill texts for"):
        privileged_logprobs(model, SkillSplicer(tokenizer), steps.input_ids, steps.attention_mask,
                            steps.loss_mask, skills[:-1], micro_batch_size=2)


# PROBE TOKEN CLASSES


def test_action_words_objects_and_the_rest_are_told_apart(policy):
    _, tokenizer = policy
    ids = tokenizer.encode("take egg 1 from countertop 2", add_special_tokens=False) + \
        [tokenizer.eos_token_id]
    classes = response_token_classes(tokenizer, ids, "bare")
    words = [tokenizer.decode([i]).strip() for i in ids]
    by_word = dict(zip(words, classes, strict=True))
    assert by_word["take"] == by_word["from"] == ACTION
    assert by_word["egg"] == by_word["countertop"] == by_word["2"] == OBJECT
    assert classes[-1] == OTHER  # the end-of-turn token


def test_tagged_responses_classify_only_the_action_block(policy):
    _, tokenizer = policy
    text = "<think>heat egg</think><action>heat egg 1 with microwave 1</action>"
    ids = tokenizer.encode(text, add_special_tokens=False)
    classes = response_token_classes(tokenizer, ids, "tagged")
    think_end = len(tokenizer.encode("<think>heat egg</think>", add_special_tokens=False))
    assert set(classes[:think_end]) == {OTHER}
    assert ACTION in classes[think_end:] and OBJECT in classes[think_end:]


def test_unparsable_responses_are_all_other(policy):
    _, tokenizer = policy
    ids = tokenizer.encode("go to\ncountertop 1", add_special_tokens=False)
    assert set(response_token_classes(tokenizer, ids, "bare")) == {OTHER}


def test_probe_gap_counts_every_response_token_once_and_matches_the_two_passes(policy):
    model, tokenizer = policy
    probes = make_trajectories(tokenizer, groups=2, rollouts=1)
    gap = probe_token_gap(model, tokenizer, probes, SkillProvider(), action_format="bare",
                          micro_batch_size=4)
    total = sum(len(s.response_ids) for t in probes for s in t.steps)
    assert gap["tokens.action"] + gap["tokens.object"] + gap["tokens.other"] == total
    # the bare responses' only "other" tokens are the end-of-turn token and lone spaces
    layout = [tokenizer.decode([i]) for t in probes for s in t.steps for i in s.response_ids]
    assert gap["tokens.other"] == sum(text.strip() in ("", "<|im_end|>") for text in layout)
    assert {"gap.action", "gap.object", "gap.other"} <= gap.keys()
