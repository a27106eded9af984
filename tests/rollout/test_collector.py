"""The collector on the fake corridor environment: rewards, groups, anchor keys, skills,
admissible decoding and prompt caches."""

from __future__ import annotations

import pytest
import torch

from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.rollout.prompts import PromptConfig
from agentcredit.train.step_tensors import tensorize_steps


class ScriptedPolicy:
    """Answers from the prompt text: ``take apple`` when the apple is in sight, else a
    scripted move; every ``garbage_every``-th call per prompt batch row answers garbage."""

    def __init__(self, tokenizer, move="go right", garbage_at_call=None):
        self.tokenizer = tokenizer
        self.move = move
        self.garbage_at_call = garbage_at_call
        self.calls = 0
        self.batch_sizes = []

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None):
        self.calls += 1
        self.batch_sizes.append(len(prompts))
        out = []
        for prompt in prompts:
            text = self.tokenizer.decode(prompt)
            current = text.split("Current observation:")[-1]
            if self.calls == self.garbage_at_call:
                response = "xyzzy\nplugh"
            elif "You see an apple" in current:
                response = "take apple"
            else:
                response = self.move
            ids = self.tokenizer.encode(response, add_special_tokens=False)
            ids.append(self.tokenizer.eos_token_id)
            out.append(Generation(ids, [-0.5] * len(ids), response))
        return out


def _collect(fake_suite, tokenizer, tasks, group_size=2, max_steps=6, **policy_kwargs):
    policy = ScriptedPolicy(tokenizer, **policy_kwargs)
    collector = RolloutCollector(policy, fake_suite(None).make_env,
                                 CollectorConfig(max_steps=max_steps, prompt=PromptConfig()))
    trajs = collector.collect(tasks, group_size, temperature=1.0,
                              generator=torch.Generator().manual_seed(0), first_group_id=7)
    return trajs, policy


def test_rollouts_of_a_task_share_a_group_id_and_run_batched(fake_suite, fake_tokenizer,
        make_fake_task):
    tasks = [make_fake_task("train", 0), make_fake_task("train", 1)]
    trajs, policy = _collect(fake_suite, fake_tokenizer, tasks, group_size=3)
    assert [t.group_id for t in trajs] == [7, 7, 7, 8, 8, 8]
    assert [t.task.task_id for t in trajs] == ["train-0"] * 3 + ["train-1"] * 3
    assert policy.batch_sizes[0] == 6  # all envs in one generate call


def test_a_won_episode_ends_with_the_outcome_reward_at_its_last_step(fake_suite, fake_tokenizer,
        make_fake_task):
    task = make_fake_task("train", 0)  # start 0, apple 1: "go right", "take apple"
    (traj,), _ = _collect(fake_suite, fake_tokenizer, [task], group_size=1)
    assert [s.action for s in traj.steps] == ["go right", "take apple"]
    assert traj.won and not traj.truncated
    assert [s.reward for s in traj.steps] == [0.0, 10.0]
    assert traj.steps[-1].env_reward == 1.0
    assert traj.steps[-1].snapshot == {"room": 1, "won": True}


def test_invalid_actions_are_penalised_at_their_step_and_truncation_gives_no_outcome(
        fake_suite, fake_tokenizer, make_fake_task):
    task = make_fake_task("train", 0)  # room 0: "go left" is not admissible
    (traj,), _ = _collect(fake_suite, fake_tokenizer, [task], group_size=1, max_steps=3,
                          move="go left")
    assert len(traj.steps) == 3 and traj.truncated and not traj.won
    assert all(not s.valid and s.reward == -0.1 for s in traj.steps)
    assert traj.steps[1].observation == "Nothing happens."


def test_an_unparsable_response_is_sent_raw_and_marked_invalid(fake_suite, fake_tokenizer,
        make_fake_task):
    (traj,), _ = _collect(fake_suite, fake_tokenizer, [make_fake_task("train", 0)], group_size=1,
                          garbage_at_call=1)
    first = traj.steps[0]
    assert first.action is None and not first.valid and first.reward == -0.1
    assert traj.steps[1].observation == "Nothing happens."  # the environment answered it
    assert traj.won  # the scripted policy then solves the task


def test_anchor_key_is_the_observation_before_the_step(fake_suite, fake_tokenizer,
        make_fake_task):
    (traj,), _ = _collect(fake_suite, fake_tokenizer, [make_fake_task("train", 2)], group_size=1)
    assert traj.steps[0].anchor_key == "You are in room 2. The room is empty."
    assert traj.steps[1].anchor_key == "You are in room 3. You see an apple."
    assert all(step.anchor_key == step.observation for step in traj.steps)


def test_the_collector_shows_a_skill_only_when_handed_a_skill_provider(fake_suite, fake_tokenizer,
                                                                       make_fake_task, tmp_path):
    from agentcredit.skills import SKILL_HEADER, SkillProvider

    (tmp_path / "fake").mkdir()
    for name, text in (("guide", "Walk the corridor."), ("type0", "Go right."),
                       ("type1", "Go left.")):
        (tmp_path / "fake" / f"{name}.md").write_text(text)
    provider = SkillProvider(tmp_path)
    tasks = [make_fake_task("train", 0), make_fake_task("train", 1)]
    collector = RolloutCollector(ScriptedPolicy(fake_tokenizer), fake_suite(None).make_env,
                                 CollectorConfig(max_steps=3, prompt=PromptConfig()))
    for skills in (None, provider):
        trajs = collector.collect(tasks, 2, temperature=1.0, skills=skills,
                                  generator=torch.Generator().manual_seed(0))
        prompts = [(t.task, fake_tokenizer.decode(s.prompt_ids)) for t in trajs for s in t.steps]
        if skills is None:
            assert not any(SKILL_HEADER in text for _, text in prompts)
        else:  # the task's own skill, in the user turn, on every recorded training prompt
            assert all(SKILL_HEADER + provider.skill_text(task) + "\n\nYour task is to:" in text
                       for task, text in prompts)


def test_admissible_decoding_makes_every_action_valid_and_records_its_sets(
        fake_suite, fake_model_dir, make_fake_task):
    from agentcredit.rollout.policy import HFPolicy
    from agentcredit.train.model_loading import load_policy

    model, tokenizer = load_policy(str(fake_model_dir))
    tasks = [make_fake_task("train", 0), make_fake_task("train", 1)]
    trajs = {}
    for decoding in ("free", "admissible"):
        collector = RolloutCollector(HFPolicy(model, tokenizer), fake_suite(None).make_env,
                                     CollectorConfig(max_steps=4, decoding=decoding,
                                                     prompt=PromptConfig()))
        trajs[decoding] = collector.collect(tasks, 4, temperature=1.0,
                                            generator=torch.Generator().manual_seed(0))
    steps = [s for t in trajs["admissible"] for s in t.steps]
    assert all(s.valid and s.reward >= 0 for s in steps)
    assert all(len(s.allowed_ids) == len(s.response_ids) for s in steps)
    tensors = tensorize_steps(trajs["admissible"], tokenizer.pad_token_id)
    assert tensors.allowed is not None
    assert ((tensors.allowed[..., 0] >= 0) == tensors.loss_mask).all()
    # the untrained model writes free text: the same rollouts unrestricted are mostly invalid
    assert sum(not s.valid for t in trajs["free"] for s in t.steps) > len(steps) // 2
    assert tensorize_steps(trajs["free"], tokenizer.pad_token_id).allowed is None


@pytest.mark.parametrize("decoding", ["free", "admissible"])
def test_reusing_prompt_caches_between_steps_changes_no_rollout(fake_suite, fake_model_dir,
                                                                make_fake_task, decoding):
    from agentcredit.rollout.policy import HFPolicy
    from agentcredit.train.model_loading import load_policy

    model, tokenizer = load_policy(str(fake_model_dir))
    tasks = [make_fake_task("train", 0), make_fake_task("train", 1)]
    prompt = PromptConfig(history_window=6, history_style="compact")
    trajs = {}
    for reuse in (False, True):
        collector = RolloutCollector(HFPolicy(model, tokenizer), fake_suite(None).make_env,
                                     CollectorConfig(max_steps=5, decoding=decoding, prompt=prompt,
                                                     reuse_prompt_cache=reuse))
        trajs[reuse] = collector.collect(tasks, 3, temperature=1.0,
                                         generator=torch.Generator().manual_seed(0))
    steps = {reuse: [s for t in ts for s in t.steps] for reuse, ts in trajs.items()}
    assert len(steps[True]) == len(steps[False]) > 2 * len(tasks) * 3
    for cached, full in zip(steps[True], steps[False], strict=True):
        assert cached.prompt_ids == full.prompt_ids
        assert cached.response_ids == full.response_ids
        assert cached.sampling_logprobs == pytest.approx(full.sampling_logprobs, abs=1e-5)


def test_on_step_counts_every_rollout_once_when_it_ends(fake_suite, fake_tokenizer, make_fake_task):
    ended = []
    collector = RolloutCollector(ScriptedPolicy(fake_tokenizer), fake_suite(None).make_env,
                                 CollectorConfig(max_steps=6, prompt=PromptConfig()))
    trajs = collector.collect([make_fake_task("train", i) for i in range(3)], 2,
                              temperature=1.0, generator=torch.Generator(), on_step=ended.append)
    assert sum(ended) == len(trajs) == 6
    assert len(ended) == max(len(t.steps) for t in trajs)
    lengths = [len(t.steps) for t in trajs]
    assert ended == [lengths.count(t + 1) for t in range(len(ended))]


def test_each_step_records_the_admissible_set_it_was_taken_in_and_the_last_one_after(
        fake_suite, fake_tokenizer, make_fake_task):
    from agentcredit.train.scoring.verifier_traces import VerifierTracer

    task = make_fake_task("train", 2)
    (traj,), _ = _collect(fake_suite, fake_tokenizer, [task], group_size=1)
    env = fake_suite(None).make_env()
    obs = env.reset(task)
    replayed = [obs.admissible_actions]
    for step in traj.steps:
        obs, *_ = env.step(step.action or step.response)
        replayed.append(obs.admissible_actions)
    recorded = [s.admissible for s in traj.steps] + [traj.final_admissible]
    assert recorded == replayed and len(set(map(tuple, recorded))) > 1
    assert VerifierTracer.admissible_sets(traj) == replayed
    traj.final_admissible = None  # a trajectory recorded without them: no support edges
    assert VerifierTracer.admissible_sets(traj) is None
