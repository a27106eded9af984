"""The tree forward computes what each row alone computes (train/scoring/tree_forward.py,
docs/backbones.md §0.1): log-probs, entropies and gradients of real step prompts for every
pass (behaviour and reference, PPO, SFT, teacher, hindsight), tree against the tests' row
oracle."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from agentcredit.config import OptimConfig, TinyModelConfig
from agentcredit.envs.base import Task
from agentcredit.rollout.admissible import ActionTrie
from agentcredit.rollout.prompts import PromptConfig, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.skills import SkillProvider, SkillSplicer
from agentcredit.train import prefix_tree, tree_training
from agentcredit.train.model_loading import load_policy
from agentcredit.train.ppo import PPOBatch, ppo_update
from agentcredit.train.prefix_tree import step_trees
from agentcredit.train.scoring import teacher as teacher_module
from agentcredit.train.scoring import tree_forward as tree_forward_module
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.scoring.hindsight_pass import HindsightSplicer
from agentcredit.train.scoring.teacher import privileged_logprobs
from agentcredit.train.scoring.tree_forward import branch_forward, trunk_forward, trunk_of
from agentcredit.train.step_tensors import StepTensors, tensorize_steps
from agentcredit.train.warm_start.model_bootstrap import bootstrap_tiny_model
from agentcredit.train.warm_start.sft import Demonstration, demonstration_steps, run_sft

from ...row_oracle import row_logprobs

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
    expected, entropy = row_logprobs(model, steps.input_ids, steps.attention_mask,
                                     allowed=steps.allowed, score_mask=steps.loss_mask,
                                     temperature=0.7)
    trees = step_trees(steps.input_ids, steps.attention_mask, steps.loss_mask,
                       steps.step_rollout)
    assert sorted(int(r) for t in trees for r in t.rows) == list(range(len(steps.input_ids)))
    rows = steps  # step rows are the Rows the forward takes
    got, got_entropy = torch.zeros_like(expected), torch.zeros_like(expected)
    with torch.no_grad():
        for tree in trees:
            trunk = trunk_of(model, tree, rows)
            for batch in tree.batches(2):
                lp, ent = branch_forward(model, trunk, tree, batch, rows, with_entropy=True,
                                         temperature=0.7)
                got[tree.rows[batch], :lp.shape[1]] = lp
                got_entropy[tree.rows[batch], :ent.shape[1]] = ent
    # every free token has a log-prob; under admissible decoding a forced token's is 0
    scored = expected[steps.loss_mask] != 0
    assert bool(scored.any() if admissible else scored.all())
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(got_entropy, entropy, atol=1e-5, rtol=0)
    lengths = steps.attention_mask.sum(1)
    computed = sum(tree.tokens(lengths) for tree in trees)
    for layout in ("trees", "rows"):  # the behaviour and reference passes
        torch.testing.assert_close(score_steps(model, steps, 2, 0.7, layout), expected,
                                   atol=1e-5, rtol=0)
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
    logprobs, entropy = row_logprobs(model, steps.input_ids, steps.attention_mask,
                                     requires_grad=True, allowed=steps.allowed,
                                     score_mask=steps.loss_mask, temperature=0.7)
    ((logprobs + 0.3 * entropy) * weights).sum().backward()
    expected = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    rows = steps  # step rows are the Rows the forward takes
    for tree in step_trees(steps.input_ids, steps.attention_mask, steps.loss_mask,
                           steps.step_rollout):
        trunk = trunk_of(model, tree, rows, grad=True)
        for batch in tree.batches(2):
            lp, ent = branch_forward(model, trunk, tree, batch, rows, with_entropy=True,
                                     temperature=0.7)
            ((lp + 0.3 * ent) * weights[tree.rows[batch], :lp.shape[1]]).sum().backward()
        trunk.backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], rtol=1e-5,
                                   atol=1e-5 * float(expected[name].abs().max()), msg=name)


def test_a_ppo_update_on_trees_moves_the_weights_as_on_rows(policy):
    """One mini-batch (the same rows either way): the same loss, so the same step."""
    model, tokenizer = policy
    steps = _steps(tokenizer, "shared history", admissible=True)
    advantages = torch.randn(steps.input_ids.shape[0], generator=torch.Generator().manual_seed(1))
    advantages = advantages[:, None] * steps.loss_mask.float()
    old, _ = row_logprobs(model, steps.input_ids, steps.attention_mask, allowed=steps.allowed,
                          score_mask=steps.loss_mask, temperature=0.7)
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


@pytest.mark.parametrize("case", list(CASES))
def test_a_skill_prefixed_teacher_row_scores_the_same_as_a_tree(policy, case):
    model, tokenizer = policy
    steps = _steps(tokenizer, case, admissible=True)
    splicer = SkillSplicer(tokenizer)
    skills = [SkillProvider().skill_text(TASK)] * steps.input_ids.shape[0]
    common = {"micro_batch_size": 3, "allowed": steps.allowed, "temperature": 0.7}
    rows = privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask,
                               steps.loss_mask, skills, **common)
    trees = privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask,
                                steps.loss_mask, skills, groups=steps.step_rollout, **common)
    expected = _privileged_oracle(model, splicer, steps, skills)
    assert bool((expected[steps.loss_mask] != 0).any())
    torch.testing.assert_close(rows, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(trees, expected, atol=1e-5, rtol=0)


def test_a_hindsight_row_scores_the_same_as_a_tree(policy):
    """The hindsight text differs per rollout: each rollout's head is its own trunk."""
    model, tokenizer = policy
    steps = _steps(tokenizer, "shared history", admissible=True)
    splicer = HindsightSplicer(tokenizer)
    texts = [OBSERVATIONS[int(r)] for r in steps.step_rollout]
    got = privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask,
                              steps.loss_mask, texts, micro_batch_size=2, allowed=steps.allowed,
                              temperature=0.7, groups=steps.step_rollout)
    torch.testing.assert_close(got, _privileged_oracle(model, splicer, steps, texts),
                               atol=1e-5, rtol=0)


def test_the_teacher_computes_each_task_head_once_for_all_its_rollouts(policy, monkeypatch):
    """Three rollouts of one task: one trunk of the skill head, whatever the trajectories."""
    model, tokenizer = policy
    steps = _steps(tokenizer, "slid window")
    splicer = SkillSplicer(tokenizer)
    skills = [SkillProvider().skill_text(TASK)] * steps.input_ids.shape[0]
    heads = []
    monkeypatch.setattr(teacher_module, "trunk_forward",
                        lambda model, ids, **kw: heads.append(len(ids)) or trunk_forward(
                            model, ids, **kw))
    privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask, steps.loss_mask,
                        skills, micro_batch_size=3, groups=steps.step_rollout)
    first = int(steps.loss_mask[0].nonzero()[0])
    head, _ = splicer.splice(steps.input_ids[0, :first].tolist(), skills[0])
    assert heads == [len(head) - 1]


def _privileged_oracle(model, splicer, steps: StepTensors, texts: list[str]) -> torch.Tensor:
    """``ℓ^T`` of each row's response from the row oracle on the row spliced by hand."""
    out = torch.zeros(steps.input_ids.shape)
    for i in range(steps.input_ids.shape[0]):
        length = int(steps.attention_mask[i].sum())
        first = int(steps.loss_mask[i].nonzero()[0])
        shared, rest = splicer.splice(steps.input_ids[i, :first].tolist(), texts[i])
        sequence = torch.tensor([[*shared, *rest, *steps.input_ids[i, first:length].tolist()]])
        n = length - first
        allowed = torch.full((1, sequence.shape[1], steps.allowed.shape[2]), -1)
        allowed[0, -n:] = steps.allowed[i, first:length]
        lp, _ = row_logprobs(model, sequence, torch.ones_like(sequence), allowed=allowed,
                             temperature=0.7)
        out[i, first:length] = lp[0, -n:]
    return out


def test_sft_on_a_recovery_sample_takes_the_rows_gradient(policy, monkeypatch):
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
    reference = copy.deepcopy(model).train()
    logprobs, _ = row_logprobs(reference, data.input_ids, data.attention_mask,
                               requires_grad=True, score_mask=data.loss_mask)
    loss = -(logprobs * data.loss_mask).sum() / data.loss_mask.sum()
    loss.backward()
    # one step of SGD at lr 1 on the whole batch moves each weight by minus its gradient
    monkeypatch.setattr(torch.optim, "AdamW",
                        lambda params, lr, weight_decay: torch.optim.SGD(params, lr=lr))
    settings = SimpleNamespace(batch_size=len(traj.steps), epochs=1, lr=1.0, weight_decay=0.0,
                               grad_clip=1e9, micro_batch_size=3)
    trunks = []  # the trunk length of every tree SFT ran
    monkeypatch.setattr(tree_training, "trunk_of", lambda model, tree, rows, **kw: trunks.append(
        tree.trunk_len) or trunk_of(model, tree, rows, **kw))
    for layout in ("trees", "rows"):
        trunks.clear()
        trained = copy.deepcopy(model)
        stats = run_sft(trained, [traj], tokenizer.pad_token_id, settings, torch.Generator(),
                        layout=layout)
        assert any(trunks) == (layout == "trees")
        assert stats["sft/steps"] == 1
        assert stats["sft/first_loss"] == pytest.approx(float(loss.detach()), rel=1e-5)
        for name, p in trained.named_parameters():
            grad = dict(reference.named_parameters())[name].grad
            torch.testing.assert_close(model.state_dict()[name] - p.detach(), grad, rtol=1e-4,
                                       atol=1e-4 * float(grad.abs().max()), msg=name)
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
    old, _ = row_logprobs(model, steps.input_ids, steps.attention_mask,
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


def test_no_module_of_src_runs_a_scoring_forward_of_its_own():
    """Sampling prefills its prompts; every other forward of the model is the tree forward's."""
    src = Path(tree_forward_module.__file__).parents[2]
    runners = {str(path.relative_to(src)) for path in src.rglob("*.py")
               if "logits_to_keep=" in path.read_text()}
    assert runners == {"rollout/policy.py", "train/scoring/tree_forward.py"}
