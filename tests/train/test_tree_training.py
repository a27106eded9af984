"""The tree-training loop PPO and SFT share (train/tree_training.py), gradient checkpointing
(train/activation_checkpointing.py) and the PPO entropy's graph: checkpointing gives the same
gradients with a real trunk and as plain rows, and holds fewer bytes for the backward; the
entropy is in the graph only when its coefficient uses it."""

from __future__ import annotations

import copy
import dataclasses
import weakref

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from agentcredit.config import OptimConfig
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train import activation_checkpointing, ppo, tree_training
from agentcredit.train.activation_checkpointing import recomputed_layers
from agentcredit.train.ppo import PPOBatch, ppo_update
from agentcredit.train.prefix_tree import layout_trees
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.step_tensors import StepTensors, tensorize_steps
from agentcredit.train.tree_training import train_trees
from agentcredit.train.warm_start.sft import run_sft

VOCAB, PAD = 48, 0


def _model(layers: int = 3, hidden: int = 32, intermediate: int = 64) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=intermediate,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, tie_word_embeddings=False,
                         initializer_range=0.2)
    return Qwen2ForCausalLM(config).float()


def _trajectories(rollouts: int = 2, steps: int = 4) -> list[Trajectory]:
    """Rollouts whose step prompts grow by one observation each: step ``t``'s prompt is step
    ``t − 1``'s plus five tokens, so the rows of a rollout share a trunk."""
    g = torch.Generator().manual_seed(3)
    out = []
    for rollout in range(rollouts):
        history = torch.randint(1, VOCAB, (12 + 5 * steps,), generator=g).tolist()
        traj = Trajectory(task=None, group_id=rollout)
        for t in range(steps):
            response = torch.randint(1, VOCAB, (3 + t % 2,), generator=g).tolist()
            traj.steps.append(Step(observation="", response="", action=None, valid=True,
                                   reward=0.0, anchor_key="", snapshot={},
                                   prompt_ids=history[:12 + 5 * t], response_ids=response,
                                   sampling_logprobs=[0.0] * len(response)))
        out.append(traj)
    return out


def _steps() -> StepTensors:
    return tensorize_steps(_trajectories(), PAD)


def test_the_steps_share_a_trunk_under_trees():
    model, steps = _model(), _steps()
    assert all(tree.trunk_len > 0 for tree in layout_trees(model, steps, "trees"))
    assert not any(tree.trunk_len for tree in layout_trees(model, steps, "rows"))


class _GradientRecorder:
    """An optimiser that records the gradient of each step and leaves the weights alone."""

    def __init__(self, params) -> None:
        self.params = list(params)
        self.grads: list[list[torch.Tensor]] = []

    def step(self) -> None:
        self.grads.append([p.grad.clone() for p in self.params])

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None


def _ppo_gradients(config: OptimConfig) -> tuple[list[list[torch.Tensor]], dict[str, float]]:
    model, steps = _model(), _steps()
    old = score_steps(model, steps, micro_batch_size=3) - 0.05
    advantages = torch.randn(steps.input_ids.shape[0], generator=torch.Generator().manual_seed(1))
    advantages = advantages[:, None] * steps.loss_mask.float()
    recorder = _GradientRecorder(model.parameters())
    model.train()
    stats = ppo_update(model, recorder, PPOBatch(steps, old, advantages, ref_logprobs=old),
                       config, torch.Generator().manual_seed(0), temperature=0.7)
    return recorder.grads, stats


def _assert_same_gradients(got, expected) -> None:
    assert len(got) == len(expected)
    for step_got, step_expected in zip(got, expected, strict=True):
        for g, e in zip(step_got, step_expected, strict=True):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5 * float(e.abs().max()))


@pytest.mark.parametrize("layout", ["trees", "rows"])
@pytest.mark.parametrize("entropy_coef", [0.0, 0.01])
def test_ppo_gradients_with_checkpointing_equal_those_without(layout, entropy_coef):
    config = OptimConfig(kl_coef=0.05, mini_batches=2, micro_batch_size=2, grad_clip=1e9,
                         entropy_coef=entropy_coef, layout=layout)
    expected, stats = _ppo_gradients(config)
    got, got_stats = _ppo_gradients(dataclasses.replace(config, gradient_checkpointing=True))
    _assert_same_gradients(got, expected)
    assert got_stats == pytest.approx(stats, rel=1e-5, abs=1e-7)


def _sft_weights(layout: str, checkpointing: bool, monkeypatch) -> dict[str, torch.Tensor]:
    """One SFT step of SGD at lr 1: the weights move by minus the gradient."""
    monkeypatch.setattr(torch.optim, "AdamW",
                        lambda params, lr, weight_decay: torch.optim.SGD(params, lr=lr))
    settings = type("SFT", (), {"batch_size": 8, "epochs": 1, "lr": 1.0, "weight_decay": 0.0,
                                "grad_clip": 1e9, "micro_batch_size": 3})()
    model = _model()
    run_sft(model, _trajectories(), PAD, settings, torch.Generator(), layout=layout,
            gradient_checkpointing=checkpointing)
    return {name: p.detach().clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("layout", ["trees", "rows"])
def test_sft_gradients_with_checkpointing_equal_those_without(layout, monkeypatch):
    start = dict(_model().named_parameters())
    expected = _sft_weights(layout, False, monkeypatch)
    got = _sft_weights(layout, True, monkeypatch)
    for name, weight in expected.items():
        step = (start[name] - weight).detach()
        assert float(step.abs().max()) > 0, name
        torch.testing.assert_close(start[name] - got[name], step, rtol=1e-5,
                                   atol=1e-5 * float(step.abs().max()), msg=name)


class _HeldBytes:
    """Bytes held for the backward: every tensor the autograd graph saves outside a
    checkpoint, and every tensor a checkpoint keeps to rerun its layer; each storage once."""

    def __init__(self, monkeypatch) -> None:
        self.storages: dict[int, int] = {}
        self.peak = 0
        original = activation_checkpointing.checkpoint

        def counting_checkpoint(fn, *args, **kwargs):
            for value in (*args, *kwargs.values()):
                for tensor in value if isinstance(value, tuple) else (value,):
                    if isinstance(tensor, torch.Tensor):
                        self.add(tensor)
            return original(fn, *args, **kwargs)

        monkeypatch.setattr(activation_checkpointing, "checkpoint", counting_checkpoint)

    def add(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        self.storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    def hooks(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(self.add, lambda tensor: tensor)

    def measure(self) -> None:
        """Called between a forward and its backward: everything counted is still alive."""
        self.peak = max(self.peak, sum(self.storages.values()))
        self.storages.clear()


def _held_bytes(checkpointing: bool, monkeypatch) -> int:
    """The most bytes held for one backward of the tree loop: one tree (a real trunk) run as
    one branch batch, on a model with enough layers that the layers dominate."""
    model, steps = _model(layers=6, hidden=64, intermediate=256), _steps()
    model.train()
    held = _HeldBytes(monkeypatch)
    (tree, *_) = layout_trees(model, steps, "trees")

    def loss(logprobs, _entropy, members):
        held.measure()
        return -(logprobs * steps.loss_mask[members, :logprobs.shape[1]]).sum(), {}

    with held.hooks():
        train_trees(model, [tree], steps, branch_batch=len(tree.rows), branch_loss=loss,
                    checkpointing=checkpointing)
    return held.peak


def test_checkpointing_holds_fewer_bytes_for_the_backward(monkeypatch):
    without = _held_bytes(False, monkeypatch)
    with_checkpointing = _held_bytes(True, monkeypatch)
    assert with_checkpointing < 0.25 * without, (with_checkpointing, without)


def test_a_checkpointed_branch_holds_none_of_its_keys_and_values_for_the_backward():
    """A branch's keys and values ``[b, heads, trunk + branch, d]`` (its trunk's columns
    copied once per row) are freed after its forward: neither the checkpoints nor the cache
    copies they rerun their layers on keep any layer's."""
    model, steps = _model(), _steps()
    model.train()
    forwards: list[list[weakref.ref]] = []
    model.register_forward_hook(lambda _m, _a, out: forwards.append(
        [weakref.ref(layer.keys) for layer in out.past_key_values.layers]))
    alive = []

    def loss(logprobs, _entropy, members):
        alive.append(sum(ref() is not None for ref in forwards[-1]))
        return -(logprobs * steps.loss_mask[members, :logprobs.shape[1]]).sum(), {}

    train_trees(model, layout_trees(model, steps, "trees"), steps, branch_batch=2,
                branch_loss=loss, checkpointing=True)
    assert len(alive) == 4 and not any(alive)


def _tree_gradients(model, steps: StepTensors, checkpointing: bool) -> list[torch.Tensor]:
    model.zero_grad()

    def loss(logprobs, entropy, members):
        mask = steps.loss_mask[members, :logprobs.shape[1]]
        return -((logprobs + 0.1 * entropy) * mask).sum(), {}

    train_trees(model, layout_trees(model, steps, "trees"), steps, branch_batch=3,
                branch_loss=loss, with_entropy=True, checkpointing=checkpointing)
    return [p.grad.clone() for p in model.parameters()]


def test_checkpointing_recomputes_under_the_autocast_of_the_forward():
    """Mixed precision runs the model's forward under bfloat16 autocast and the backward
    outside it: the recompute runs in bfloat16 as the forward did, so the gradients are the
    same as without checkpointing."""
    model, steps = _model(), _steps()
    model.train()
    forward = model.forward

    def autocast_forward(*args, **kwargs):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return forward(*args, **kwargs)

    model.forward = autocast_forward
    expected = _tree_gradients(model, steps, False)
    got = _tree_gradients(model, steps, True)
    full_precision = _tree_gradients(_model(), steps, False)
    _assert_same_gradients([got], [expected])
    assert not all(torch.equal(a, b) for a, b in zip(expected, full_precision, strict=True))


def test_hugging_face_checkpointing_is_refused_because_it_drops_the_caches():
    model = _model()
    model.gradient_checkpointing_enable()
    for enabled in (True, False):
        with pytest.raises(ValueError, match="drops the caches"), recomputed_layers(model,
                                                                                  enabled):
            pass


def test_the_layers_are_restored_when_the_context_closes():
    model = _model()
    with recomputed_layers(model):
        assert all("forward" in vars(layer) for layer in model.model.layers)
    assert not any("forward" in vars(layer) for layer in model.model.layers)


def test_entropy_keeps_no_graph_when_its_coefficient_is_0_and_the_update_is_unchanged(
        monkeypatch):
    """The update and every figure (``ppo/entropy`` among them) equal those of the update
    that kept the entropy's graph, and the backward holds fewer bytes."""
    config = OptimConfig(kl_coef=0.0, mini_batches=1, micro_batch_size=4, entropy_coef=0.0)
    train = tree_training.train_trees
    entropies: list[torch.Tensor] = []
    monkeypatch.setattr(ppo, "_loss", lambda logprobs, entropy, *args, loss=ppo._loss: (
        entropies.append(entropy) or loss(logprobs, entropy, *args)))
    results = []
    for force_graph in (False, True):
        held = {"bytes": 0}

        def counted(*args, _force=force_graph, _held=held, **kwargs):
            def pack(tensor):
                _held["bytes"] += tensor.untyped_storage().nbytes()
                return tensor

            if _force:  # the former update: the entropy always in the graph
                kwargs["entropy_grad"] = True
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
                return train(*args, **kwargs)

        monkeypatch.setattr(ppo, "train_trees", counted)
        entropies.clear()
        model, steps = _model(), _steps()
        old = score_steps(model, steps, micro_batch_size=4)
        advantages = torch.linspace(-1, 1, steps.input_ids.shape[0])[:, None] * steps.loss_mask
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        stats = ppo_update(model, optimizer, PPOBatch(steps, old, advantages), config,
                           torch.Generator().manual_seed(0))
        assert entropies and all(e.requires_grad == force_graph for e in entropies)
        results.append((copy.deepcopy(model.state_dict()), stats, held["bytes"]))
    (weights, stats, saved), (graph_weights, graph_stats, graph_saved) = results
    assert stats == graph_stats and stats["ppo/entropy"] > 0
    for name, weight in graph_weights.items():
        assert torch.equal(weights[name], weight), name
    assert saved < graph_saved
