"""SFT warm start: expert replays become rollout-format samples, and cloning them teaches the
tiny model to solve the fake corridor."""

from __future__ import annotations

import torch

from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import HFPolicy
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.train.config import SFTConfig
from agentcredit.train.evaluate import evaluate
from agentcredit.train.models import load_policy
from agentcredit.train.sft import (
    demonstration_steps,
    demonstration_texts,
    expert_demonstrations,
    run_sft,
)
from agentcredit.train.tiny_model import TinyModelConfig, bootstrap_tiny_model


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
                    torch.Generator().manual_seed(0))
    assert stats["sft/final_loss"] < 0.2 * stats["sft/first_loss"]
    # from rooms 1 and 2 the apple's side is a guess, so 100% is not expected
    assert before == 0.0 and success() >= 0.5
