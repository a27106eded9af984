"""Admissible-action decoding: the trie, the renormalised distribution, and one distribution
for the sampler and every scoring pass (sampled and rescored log-probs agree to 1e-5)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from agentcredit.rollout.admissible import (
    ActionTrie,
    allowed_tensor,
    pack_sets,
    restrict_logits,
)
from agentcredit.rollout.policy import HFPolicy
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.skills import SkillSplicer
from agentcredit.train.model_loading import load_policy
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.scoring.logprobs import logprob_entropy_rows
from agentcredit.train.scoring.teacher import privileged_logprobs
from agentcredit.train.step_tensors import tensorize_steps

COMMANDS = ("go to countertop 1", "go to countertop 2", "take egg 1 from countertop 2",
            "open cabinet 1", "inventory", "look")


def test_the_trie_gives_each_prefix_its_continuations():
    trie = ActionTrie([[5, 6, 2], [5, 7, 2], [5, 6, 8, 2], [9, 2]])
    assert trie.allowed_after([]) == [5, 9]
    assert trie.allowed_after([5]) == [6, 7]
    assert trie.allowed_after([5, 6]) == [2, 8]  # a command and a longer one share a prefix
    assert trie.allowed_after([5, 6, 2]) == []
    assert trie.allowed_after([4]) == []
    assert trie.allowed_along([5, 6, 8, 2]) == [[5, 9], [6, 7], [2, 8], [2]]
    assert trie.depth == 4


def test_an_empty_command_list_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="decoding=admissible"):
        ActionTrie([])


def test_restricted_log_probs_and_entropy_are_those_of_the_renormalised_distribution():
    # logits ln1, ln2, ln3, ln4; allowed {1, 2}: p̃ = (2/5, 3/5)
    logits = torch.log(torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]))
    allowed = torch.tensor([[1, 2, -1], [-1, -1, -1]])
    lp, ent = logprob_entropy_rows(logits, torch.tensor([2, 3]), True, allowed)
    assert lp[0].item() == pytest.approx(math.log(3 / 5), abs=1e-6)
    assert ent[0].item() == pytest.approx(-(0.4 * math.log(0.4) + 0.6 * math.log(0.6)), abs=1e-6)
    assert lp[1].item() == pytest.approx(math.log(4 / 10), abs=1e-6)  # an unrestricted row
    masked = restrict_logits(logits, allowed)
    assert torch.isinf(masked[0, [0, 3]]).all() and torch.isfinite(masked[1]).all()


def test_tempered_log_probs_are_those_of_the_scaled_logits():
    # logits ln1 … ln4 at T = 1/2 give p ∝ (1, 4, 9, 16), /30; over allowed {1, 2}: (4, 9) / 13
    logits = torch.log(torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]))
    allowed = torch.tensor([[1, 2, -1, -1], [0, 1, 2, 3]])
    lp, ent = logprob_entropy_rows(logits, torch.tensor([2, 3]), True, allowed, temperature=0.5)
    assert lp[0].item() == pytest.approx(math.log(9 / 13), abs=1e-6)
    assert ent[0].item() == pytest.approx(-(4 / 13 * math.log(4 / 13) + 9 / 13 * math.log(9 / 13)),
                                          abs=1e-6)
    assert lp[1].item() == pytest.approx(math.log(16 / 30), abs=1e-6)


def test_a_temperature_of_zero_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="temperature 1"):
        logprob_entropy_rows(torch.zeros(1, 3), torch.tensor([0]), False, temperature=0.0)


def test_restricted_entropy_has_a_finite_gradient():
    logits = torch.randn(3, 6, requires_grad=True)
    allowed = torch.tensor([[0, 4, -1], [2, -1, -1], [-1, -1, -1]])
    lp, ent = logprob_entropy_rows(logits, torch.tensor([4, 2, 1]), True, allowed)
    (lp.sum() + ent.sum()).backward()
    assert torch.isfinite(logits.grad).all()
    assert logits.grad[0, [1, 2, 3, 5]].abs().max() == 0  # outside the set: no gradient


def test_pack_sets_pads_with_minus_one():
    assert pack_sets([[3, 4], [], [7]]).tolist() == [[3, 4], [-1, -1], [7, -1]]


def test_allowed_tensor_places_each_set_at_its_response_token():
    packed = allowed_tensor([[[3, 4], [7]], None], offsets=[2, 0], length=5)
    assert packed.shape == (2, 5, 2)
    assert packed[0, 2].tolist() == [3, 4] and packed[0, 3].tolist() == [7, -1]
    assert (packed[0, :2] == -1).all() and (packed[1] == -1).all()


@pytest.fixture(scope="module")
def policy(fake_model_dir):
    model, tokenizer = load_policy(str(fake_model_dir))
    return HFPolicy(model, tokenizer)


def _sample(policy, temperature, seed=0):
    tok = policy.tokenizer
    prompts = [tok.encode(text, add_special_tokens=False)
               for text in ["You are in room 1.", "Nothing happens. You see an apple.",
                            "go left"]]
    tries = [ActionTrie.from_commands(tok, COMMANDS[:k], "bare") for k in (6, 3, 1)]
    gens = policy.generate(prompts, temperature=temperature, max_new_tokens=2,
                           generator=torch.Generator().manual_seed(seed), tries=tries)
    steps = [Step("", g.text, g.text, True, 0.0, "", {}, list(p), g.token_ids, g.logprobs,
                  allowed_ids=g.allowed_ids) for p, g in zip(prompts, gens, strict=True)]
    return gens, steps


def test_every_sampled_response_is_an_admissible_command(policy):
    for seed in range(5):
        gens, _ = _sample(policy, 1.0, seed)
        for gen, k in zip(gens, (6, 3, 1), strict=True):
            assert gen.text in COMMANDS[:k]  # whole, though max_new_tokens=2 is shorter
            assert gen.token_ids[-1] == policy.tokenizer.eos_token_id
        assert gens[2].logprobs == pytest.approx([0.0] * len(gens[2].logprobs), abs=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 0.4])
def test_sampled_and_rescored_log_probs_agree_to_1e_5(policy, temperature):
    _, steps = _sample(policy, temperature, seed=1)
    tensors = tensorize_steps([Trajectory(task=None, group_id=0, steps=steps)],
                              policy.tokenizer.pad_token_id)
    rescored = score_steps(policy.model, tensors, micro_batch_size=2, temperature=temperature)
    mask = tensors.loss_mask
    assert torch.allclose(rescored[mask], tensors.sampling_logprobs[mask], atol=1e-5)


def test_unrestricted_rescoring_differs_so_the_check_above_can_fail(policy):
    _, steps = _sample(policy, 1.0, seed=1)
    tensors = tensorize_steps([Trajectory(task=None, group_id=0, steps=steps)],
                              policy.tokenizer.pad_token_id)
    tensors = dataclasses.replace(tensors, allowed=None)
    rescored = score_steps(policy.model, tensors, micro_batch_size=2)
    gap = (rescored - tensors.sampling_logprobs)[tensors.loss_mask].abs().max()
    assert gap > 1e-2


def test_tempered_samples_rescored_at_temperature_1_differ_so_the_check_above_can_fail(policy):
    _, steps = _sample(policy, 0.4, seed=1)
    tensors = tensorize_steps([Trajectory(task=None, group_id=0, steps=steps)],
                              policy.tokenizer.pad_token_id)
    rescored = score_steps(policy.model, tensors, micro_batch_size=2)
    mask = tensors.loss_mask & (tensors.sampling_logprobs < -1e-3)  # tokens with a choice
    assert mask.any()
    assert (rescored - tensors.sampling_logprobs)[mask].abs().max() > 1e-2


def test_the_teacher_renormalises_over_the_same_sets(policy):
    """Each first response token scored by the teacher: the restricted probabilities of the
    alternatives sum to 1, on trees (the head a shared trunk) and on rows."""
    tok = policy.tokenizer
    prompt = build_prompt_ids(tok, "heat some egg", [], "You are in room 1.", COMMANDS,
                              PromptConfig())
    trie = ActionTrie.from_commands(tok, COMMANDS, "bare")
    first = trie.allowed_after([])
    steps = [Step("", "", None, True, 0.0, "", {}, list(prompt), [v], [0.0],
                  allowed_ids=[first]) for v in first]
    tensors = tensorize_steps([Trajectory(task=None, group_id=0, steps=steps)],
                              tok.pad_token_id)
    for groups in (tensors.step_rollout, None):
        teacher = privileged_logprobs(policy.model, SkillSplicer(tok), tensors.input_ids,
                                      tensors.attention_mask, tensors.loss_mask,
                                      ["Heat the egg first."] * len(steps), micro_batch_size=2,
                                      groups=groups, allowed=tensors.allowed)
        total = teacher[tensors.loss_mask].exp().sum().item()
        assert total == pytest.approx(1.0, abs=1e-5)
