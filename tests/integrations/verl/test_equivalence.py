"""The verl path gives the embedded trainer's advantages (issue 17, "Equivalence").

The same rollouts go through the embedded trainer's credit step (``credit_batch``,
``TokenScores.from_step_rows`` on ``StepTensors``, the estimator, the write-back
``CreditResult.per_token``) and through the verl path (per-step rows in verl's layout, shuffled as
``balance_batch`` would, ``rows.compute_row_credit``). Needs no verl: the rows are what a
``DataProto`` holds.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from agentcredit.credit import get_estimator
from agentcredit.credit.adrs import ADRSConfig
from agentcredit.credit.gigpo import GiGPOConfig
from agentcredit.credit.grpo import GRPOConfig
from agentcredit.credit.tokens import TokenScores
from agentcredit.credit.vict import VICTConfig
from agentcredit.integrations.verl import rows as verl_rows
from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.train.scoring.verifier_traces import VerifierTracer
from agentcredit.train.step_tensors import credit_batch, tensorize_steps

ACTIONS = ("go left", "go right", "take apple", "jump")
GROUP_SIZE = 4
TASKS = 3


class RandomActionPolicy:
    """Answers every prompt with a random action from ``ACTIONS`` (seeded)."""

    def __init__(self, tokenizer, seed: int):
        self.tokenizer = tokenizer
        self.rng = random.Random(seed)

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None):
        out = []
        for _ in prompts:
            action = self.rng.choice(ACTIONS)
            ids = self.tokenizer.encode(action, add_special_tokens=False) + [
                self.tokenizer.eos_token_id]
            out.append(Generation(ids, [-0.5] * len(ids), action))
        return out


def _collect(fake_tokenizer, make_fake_task, make_env):
    tasks = [make_fake_task("train", i) for i in range(TASKS)]
    collector = RolloutCollector(RandomActionPolicy(fake_tokenizer, seed=3), make_env,
                                 CollectorConfig(max_steps=6))
    trajectories = collector.collect(tasks, GROUP_SIZE, temperature=1.0,
                                     generator=torch.Generator().manual_seed(0))
    return trajectories


def _embedded(trajectories, steps, estimator, options, teacher, old, ref, traces):
    """The embedded trainer's credit step (train/credit_inputs.py + train/step_tensors.py)."""
    batch = credit_batch(trajectories, traces)
    if teacher is not None:
        batch = dataclasses.replace(batch, tokens=TokenScores.from_step_rows(
            steps.loss_mask, teacher, old, ref, update=1))
    result = get_estimator(estimator)(batch, options)
    return result.per_token(steps.loss_mask)


def _verl_rows(trajectories, steps, traces, teacher, old, ref, permutation):
    """The same steps as verl rows: response-aligned ``[R, L]`` tensors, rows permuted."""
    fields: dict[str, list] = {name: [] for name in (*verl_rows.STEP_FIELDS, verl_rows.GROUP)}
    responses = []
    for i, trajectory in enumerate(trajectories):
        uid = f"uid{trajectory.group_id}"
        for row in verl_rows.step_fields(trajectory, f"{uid}_{i}",
                                         traces[i] if traces else None):
            row[verl_rows.GROUP] = uid
            for name, value in row.items():
                fields[name].append(value)
        responses += [len(s.response_ids) for s in trajectory.steps]
    width = max(responses) + 2  # verl pads responses to a common width
    count = len(responses)
    mask = torch.zeros(count, width, dtype=torch.long)
    per_token = {name: torch.zeros(count, width) for name in ("teacher", "old", "ref")}
    sources = {"teacher": teacher, "old": old, "ref": ref}
    for s in range(count):
        mask[s, :responses[s]] = 1
        for name, full in sources.items():
            if full is not None:
                per_token[name][s, :responses[s]] = full[s][steps.loss_mask[s]]
    fields = {name: [values[p] for p in permutation] for name, values in fields.items()}
    return verl_rows.StepRows(
        fields=fields, response_mask=mask[permutation],
        old_log_probs=per_token["old"][permutation] if old is not None else None,
        ref_log_prob=per_token["ref"][permutation] if ref is not None else None,
        teacher_log_probs=per_token["teacher"][permutation] if teacher is not None else None)


METHODS = {
    "grpo": ("grpo", GRPOConfig()),
    "gigpo": ("gigpo", GiGPOConfig()),
    "vict_gigpo": ("vict", VICTConfig(backbone=GiGPOConfig())),
    "adrs_gigpo": ("adrs", ADRSConfig(backbone=GiGPOConfig())),
}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_verl_rows_give_the_embedded_trainers_advantages(method, fake_tokenizer,
                                                         make_fake_task, fake_suite):
    make_env = fake_suite(None).make_env
    estimator, options = METHODS[method]
    trajectories = _collect(fake_tokenizer, make_fake_task, make_env)
    steps = tensorize_steps(trajectories, fake_tokenizer.pad_token_id)
    inputs = get_estimator(estimator).inputs(options)
    traces = VerifierTracer(make_env).trace(trajectories) if "traces" in inputs else None
    generator = torch.Generator().manual_seed(7)
    teacher = old = ref = None
    if "teacher" in inputs:
        shape = steps.loss_mask.shape
        teacher = -torch.rand(shape, generator=generator) * 3 * steps.loss_mask
        old = -torch.rand(shape, generator=generator) * 3 * steps.loss_mask
        ref = -torch.rand(shape, generator=generator) * 3 * steps.loss_mask
    embedded = _embedded(trajectories, steps, estimator, options, teacher, old, ref, traces)

    permutation = torch.randperm(steps.loss_mask.shape[0], generator=generator).tolist()
    rows = _verl_rows(trajectories, steps, traces, teacher, old, ref, permutation)
    advantages, _, _, _ = verl_rows.compute_row_credit(rows, estimator, options, update=1)

    # verl row r holds flat step permutation[r]; undo it and compare token by token
    in_steps = torch.empty_like(advantages)
    in_steps[torch.tensor(permutation)] = advantages
    mask = torch.empty_like(rows.response_mask)
    mask[torch.tensor(permutation)] = rows.response_mask
    assert embedded[steps.loss_mask].abs().sum() > 0, "the rollouts carry no signal"
    torch.testing.assert_close(in_steps[mask.bool()], embedded[steps.loss_mask],
                               atol=1e-6, rtol=0)
    assert (advantages[~rows.response_mask.bool()] == 0).all()


def test_a_rollout_that_lost_a_row_is_refused_with_its_id(fake_tokenizer, make_fake_task,
                                                          fake_suite):
    trajectories = _collect(fake_tokenizer, make_fake_task, fake_suite(None).make_env)
    steps = tensorize_steps(trajectories, fake_tokenizer.pad_token_id)
    keep = list(range(steps.loss_mask.shape[0]))
    long_rollout = next(i for i, t in enumerate(trajectories) if len(t.steps) > 1)
    first = sum(len(t.steps) for t in trajectories[:long_rollout])
    keep.remove(first + 1)  # its second step never reached the advantage step
    rows = _verl_rows(trajectories, steps, None, None, None, None, keep)
    with pytest.raises(ValueError, match=f"uid{trajectories[long_rollout].group_id}_"
                                         f"{long_rollout}"):
        verl_rows.compute_row_credit(rows, "gigpo")


def test_a_trace_whose_aggregator_is_a_lambda_is_refused_before_it_leaves_the_loop(
        fake_tokenizer, make_fake_task, fake_suite):
    make_env = fake_suite(None).make_env
    trajectories = _collect(fake_tokenizer, make_fake_task, make_env)
    trace = VerifierTracer(make_env).trace(trajectories[:1])[0]
    unpicklable = dataclasses.replace(trace, aggregate=lambda z: 0.0)
    with pytest.raises(ValueError, match=f"task {trace.task_id!r} does not pickle"):
        verl_rows.step_fields(trajectories[0], "uid0_0", unpicklable)


def test_a_trace_that_arrives_as_a_dict_is_refused_with_its_trajectory(
        fake_tokenizer, make_fake_task, fake_suite):
    """What verl's pydantic dump makes of a ``RolloutTrace`` sent without pickling."""
    make_env = fake_suite(None).make_env
    trajectories = _collect(fake_tokenizer, make_fake_task, make_env)
    steps = tensorize_steps(trajectories, fake_tokenizer.pad_token_id)
    traces = VerifierTracer(make_env).trace(trajectories)
    rows = _verl_rows(trajectories, steps, traces, None, None, None,
                      list(range(steps.loss_mask.shape[0])))
    rows.fields[verl_rows.TRACE][0] = dataclasses.asdict(traces[0])
    with pytest.raises(TypeError, match=f"'uid{trajectories[0].group_id}_0' carries a dict"):
        verl_rows.compute_row_credit(rows, "vict", METHODS["vict_gigpo"][1])
