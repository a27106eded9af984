"""SFT warm start: expert replays become rollout-format samples, and cloning them teaches the
tiny model to solve the fake corridor."""

from __future__ import annotations

import pytest
import torch

from agentcredit.config import SFTConfig, TinyModelConfig
from agentcredit.envs.base import Task
from agentcredit.rollout.admissible import ActionTrie
from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation, HFPolicy
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.train.evaluation.evaluate import evaluate
from agentcredit.train.model_loading import load_policy
from agentcredit.train.step_tensors import tensorize_steps
from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model
from agentcredit.train.warm_start.sft import (
    RECOVERY_MAX_TRIES,
    Demonstration,
    demonstration_steps,
    demonstration_texts,
    expert_demonstrations,
    run_sft,
)

from ...row_oracle import row_logprobs


def _tasks(make_fake_task, split, n):
    return [make_fake_task(split, i) for i in range(n)]


def test_expert_replay_records_what_the_agent_saw_before_each_action(fake_suite, make_fake_task):
    env = fake_suite(None).make_env()
    (demo,) = expert_demonstrations(env, [make_fake_task("train", 2)])  # start 2, apple 3
    assert demo.won and demo.actions == ["go right", "take apple"]
    assert demo.observations == ["You are in room 2. The room is empty.",
                                 "You are in room 3. You see an apple."]
    assert demo.admissible[1] == ("go left", "take apple")


def test_demonstration_samples_are_rollout_prompts_plus_the_action_and_eos(
        fake_suite, make_fake_task, fake_tokenizer):
    env = fake_suite(None).make_env()
    demos = expert_demonstrations(env, [make_fake_task("train", 2)])
    prompt = PromptConfig(history_window=1)
    (traj,) = demonstration_steps(demos, fake_tokenizer, prompt)
    second = traj.steps[1]
    assert second.prompt_ids == build_prompt_ids(
        fake_tokenizer, "take the apple", [("You are in room 2. The room is empty.", "go right")],
        "You are in room 3. You see an apple.", ("go left", "take apple"), prompt)
    assert fake_tokenizer.decode(second.response_ids) == "take apple<|im_end|>"


def test_recovery_samples_follow_wrong_actions_with_the_experts_action(
        fake_suite, make_fake_task, fake_tokenizer):
    env = fake_suite(None).make_env()
    (demo,) = expert_demonstrations(env, [make_fake_task("train", 2)])
    assert demo.invalid_observation == "Nothing happens."
    prompt = PromptConfig(history_window=1)
    (plain,) = demonstration_steps([demo], fake_tokenizer, prompt)
    start = "You are in room 2. The room is empty."
    # at the first step the only inadmissible demo action is "take apple"
    one_try = build_prompt_ids(fake_tokenizer, "take the apple", [(start, "take apple")],
                               "Nothing happens.", ("go left", "go right"), prompt)
    two_tries = build_prompt_ids(fake_tokenizer, "take the apple",
                                 [(start, "take apple"), ("Nothing happens.", "take apple")],
                                 "Nothing happens.", ("go left", "go right"), prompt)
    seen = set()
    for seed in range(12):
        (traj,) = demonstration_steps([demo], fake_tokenizer, prompt, recovery=1.0, seed=seed)
        recovered = [s for s in traj.steps if s.observation == "Nothing happens."]
        assert len(plain.steps) == 2 and len(traj.steps) == 4
        assert [s.action for s in recovered] == ["go right", "take apple"]
        assert recovered[0].prompt_ids in (one_try, two_tries)
        seen.add(recovered[0].prompt_ids == two_tries)
    # 1 to history_window + 1 = 2 wrong actions in a row: both counts occur
    assert seen == {False, True}


class _ReplayPolicy:
    """Answers each rollout with the given actions in order (the collector's policy protocol)."""

    def __init__(self, tokenizer, actions):
        self.tokenizer, self.actions, self.calls = tokenizer, actions, 0

    def generate(self, prompts, **sampling):
        text = self.actions[self.calls]
        self.calls += 1
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return [Generation(ids, [0.0] * len(ids), text) for _ in prompts]


@pytest.mark.parametrize("prompt", [PromptConfig(history_window=2),
                                    PromptConfig(history_window=30, history_style="compact"),
                                    PromptConfig(history_window=30, history_style="compact",
                                                 max_prompt_tokens=100)],
                         ids=["pairs", "compact", "compact-over-budget"])
def test_sft_samples_have_the_prompt_ids_a_rollout_of_the_same_actions_sees(
        fake_suite, make_fake_task, fake_tokenizer, prompt):
    task = make_fake_task("train", 2, size=8)  # start 2, apple 7: five moves, then take
    (demo,) = expert_demonstrations(fake_suite(None).make_env(), [task])
    assert len(demo.actions) == 6
    (cloned,) = demonstration_steps([demo], fake_tokenizer, prompt)
    collector = RolloutCollector(_ReplayPolicy(fake_tokenizer, demo.actions),
                                 fake_suite(None).make_env,
                                 CollectorConfig(max_steps=10, prompt=prompt))
    (rollout,) = collector.collect([task], 1, temperature=1.0, generator=torch.Generator())
    assert rollout.won
    assert [s.prompt_ids for s in cloned.steps] == [s.prompt_ids for s in rollout.steps]
    assert max(len(s.prompt_ids) for s in cloned.steps) <= prompt.max_prompt_tokens


def test_compact_recovery_samples_end_the_history_with_the_wrong_actions(
        fake_suite, make_fake_task, fake_tokenizer):
    env = fake_suite(None).make_env()
    (demo,) = expert_demonstrations(env, [make_fake_task("train", 2)])  # go right, take apple
    prompt = PromptConfig(history_window=30, history_style="compact")
    counts = set()
    for seed in range(20):
        (traj,) = demonstration_steps([demo], fake_tokenizer, prompt, recovery=1.0, seed=seed)
        recovered = traj.steps[1]  # the first step's recovery sample: "take apple" tried k times
        text = fake_tokenizer.decode(recovered.prompt_ids)
        k = text.count("> take apple")
        counts.add(k)
        assert text.count("> take apple | Nothing happens.") == k - 1
        assert "> take apple\nCurrent observation: Nothing happens." in text
        assert recovered.action == "go right"
    # a long window is not filled with failures: 1 to RECOVERY_MAX_TRIES tries
    assert counts == set(range(1, RECOVERY_MAX_TRIES + 1))


def test_the_tokenizer_corpus_renders_the_prompts_history_style(fake_suite, make_fake_task):
    demos = expert_demonstrations(fake_suite(None).make_env(), [make_fake_task("train", 1)])
    # start 1, apple 0: go left, take apple
    compact = list(demonstration_texts(demos, "bare", "compact"))
    assert "Your past actions and what followed:\n> go left\nCurrent observation" in compact[3]
    pairs = list(demonstration_texts(demos, "bare"))
    assert "Recent steps:\nObservation: You are in room 1." in pairs[3]
    assert [t for t in compact if "past actions" in t or "Recent" in t] == [compact[3]]


def test_cloning_the_expert_solves_the_fake_corridor(fake_suite, make_fake_task, tmp_path):
    suite = fake_suite(None)
    demos = expert_demonstrations(suite.make_env(), _tasks(make_fake_task, "train", 8))
    model_dir = bootstrap_tiny_model(
        demonstration_texts(demos, "bare"), tmp_path,
        TinyModelConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        num_key_value_heads=1, intermediate_size=64,
                        max_position_embeddings=512))
    model, tokenizer = load_policy(str(model_dir))
    prompt = PromptConfig()
    collector = RolloutCollector(HFPolicy(model, tokenizer), suite.make_env,
                                 CollectorConfig(max_steps=5, prompt=prompt))
    valid = {"valid_seen": _tasks(make_fake_task, "valid_seen", 4)}

    def success() -> float:
        return evaluate(collector, valid, temperature=0,
                        generator=torch.Generator())["eval/success"]

    before = success()
    stats = run_sft(model, demonstration_steps(demos, tokenizer, prompt),
                    tokenizer.pad_token_id,
                    SFTConfig(epochs=20, lr=0.01, batch_size=4, micro_batch_size=2),
                    # batches of whole demonstrations: with orders 1-5 the cloned policy won
                    # 50-75% of the four games, with order 0 none
                    torch.Generator().manual_seed(1))
    assert stats["sft/final_loss"] < 0.2 * stats["sft/first_loss"]
    # from rooms 1 and 2 the apple's side is a guess, so 100% is not expected
    assert before == 0.0 and success() >= 0.5


def test_admissible_demonstrations_carry_their_sets_and_sft_trains_the_restricted_nll(
        tiny_model_dir):
    """The SFT loss under admissible decoding is the NLL of p̃: a one-command state costs 0."""
    model, tokenizer = load_policy(str(tiny_model_dir))
    task = Task(task_id="t", env="alfworld", split="train", instruction="heat some egg",
                task_type="pick_heat_then_place", payload={})
    commands = [("go to countertop 1", "open cabinet 1"), ("inventory",)]
    demo = Demonstration(task, ["You arrive.", "You open it."], commands,
                         ["open cabinet 1", "inventory"], won=True)
    trajs = demonstration_steps([demo], tokenizer, PromptConfig(), decoding="admissible")
    first, _ = trajs[0].steps
    trie = ActionTrie.from_commands(tokenizer, commands[0], "bare")
    assert first.allowed_ids == trie.allowed_along(first.response_ids)
    steps = tensorize_steps(trajs, tokenizer.pad_token_id)
    lp, _ = row_logprobs(model, steps.input_ids, steps.attention_mask, allowed=steps.allowed)
    second_row = lp[1][steps.loss_mask[1]]
    assert torch.allclose(second_row, torch.zeros_like(second_row), atol=1e-6)
    first_row = lp[0][steps.loss_mask[0]]
    assert (first_row[:1] < 0).all()  # two commands start differently: a real choice
    assert demonstration_steps([demo], tokenizer, PromptConfig())[0].steps[0].allowed_ids is None


def test_a_labelled_step_trains_the_label_after_the_history_of_the_played_actions(
        fake_tokenizer):
    task = Task("t0", "fake", "train", "take the apple", "corridor")
    start, middle = "You are in room 2. The room is empty.", "You are in room 1. The room is empty."
    demo = Demonstration(task, [start, middle], [("go left", "go right"), ("go right",)],
                         actions=["go left", "go right"], won=False,
                         labels=["go right", "go right"])
    prompt = PromptConfig(history_window=1)
    (traj,) = demonstration_steps([demo], fake_tokenizer, prompt)
    first, second = traj.steps
    assert fake_tokenizer.decode(first.response_ids) == "go right<|im_end|>"
    assert second.prompt_ids == build_prompt_ids(fake_tokenizer, "take the apple",
                                                 [(start, "go left")], middle, ("go right",),
                                                 prompt)
    assert list(demonstration_texts([demo], "bare"))[2] == "go right"


def test_several_or_noisy_demonstrations_need_an_environment_that_labels_them(
        fake_suite, make_fake_task):
    env = fake_suite(None).make_env()
    with pytest.raises(ValueError, match="labelled_demonstration"):
        expert_demonstrations(env, [make_fake_task("train", 2)], copies=2)
    with pytest.raises(ValueError, match="labelled_demonstration"):
        expert_demonstrations(env, [make_fake_task("train", 2)], noise=0.1)
