"""The PPO update over step samples (train/ppo.py): rows without a gradient are skipped."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from agentcredit.config import OptimConfig
from agentcredit.credit.aux_losses import get_aux_loss
from agentcredit.train.ppo import PPOBatch, ppo_update, rollout_weights
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.step_tensors import StepTensors

ROWS, LENGTH, PROMPT = 12, 10, 6


def _model() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=64, tie_word_embeddings=True)
    return Qwen2ForCausalLM(config).float()


def _steps() -> StepTensors:
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(PROMPT + 2, LENGTH + 1, (ROWS,), generator=g)
    attention = (torch.arange(LENGTH)[None] < lengths[:, None]).long()
    loss_mask = attention.bool() & (torch.arange(LENGTH)[None] >= PROMPT)
    return StepTensors(input_ids=torch.randint(1, 32, (ROWS, LENGTH), generator=g) * attention,
                       attention_mask=attention, loss_mask=loss_mask,
                       sampling_logprobs=torch.zeros(ROWS, LENGTH),
                       step_rollout=torch.arange(ROWS))


def _update(advantage_rows: torch.Tensor, config: OptimConfig, forwards: list[int] | None = None):
    """Two PPO updates from the same start; returns the weights and the last update's stats."""
    model = _model()
    if forwards is not None:
        model.register_forward_hook(lambda _m, args, _out: forwards.append(1))
    steps = _steps()
    # plain SGD: a wrong loss scale (|V|) shows in the weights, which AdamW would normalise away
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    advantages = advantage_rows[:, None] * steps.loss_mask.float()
    for update in range(2):
        old = score_steps(model, steps, micro_batch_size=4)
        stats = ppo_update(model, optimizer, PPOBatch(steps, old, advantages), config,
                           torch.Generator().manual_seed(update))
    return copy.deepcopy(model.state_dict()), stats


def _advantages() -> torch.Tensor:
    # rows 0-3 one group with signal; rows 4-11 groups whose rollouts all scored alike
    return torch.tensor([1.5, -0.5, -0.5, -0.5] + [0.0] * 8)


def test_rows_without_advantage_are_not_run_and_the_update_is_unchanged():
    """The update equals the update with the silent rows run (their zeros kept in |V|)."""
    config = OptimConfig(lr=1e-2, kl_coef=0.0, mini_batches=3, micro_batch_size=2)
    forwards: list[int] = []
    skipped, stats = _update(_advantages(), config, forwards)
    # an entropy coefficient of 0+ forces every row through and changes nothing else
    everything = OptimConfig(**{**config.__dict__, "entropy_coef": 1e-30})
    ran_all, _ = _update(_advantages(), everything)
    for name, weight in ran_all.items():
        assert torch.allclose(skipped[name], weight, atol=1e-7), name
    assert any(not torch.equal(weight, _model().state_dict()[name])
               for name, weight in skipped.items())  # the update did move the weights
    assert stats["ppo/trained_rows"] == pytest.approx(4 / 12)
    # per update: 2 scoring passes of micro-batches of 4 (3 forwards) and 4 trained rows in
    # micro-batches of at most 2 over 3 mini-batches (at most 4 forwards, at least 2)
    per_update_training = (len(forwards) - 2 * 3) / 2
    assert 2 <= per_update_training <= 4


def test_every_row_runs_when_the_loss_has_more_than_the_policy_gradient():
    config = OptimConfig(lr=1e-2, kl_coef=0.0, entropy_coef=0.01, mini_batches=3,
                         micro_batch_size=2)
    assert _update(_advantages(), config)[1]["ppo/trained_rows"] == 1.0


def test_a_batch_without_signal_still_steps_the_optimiser():
    """AdamW keeps moving with its momentum on a zero gradient, as the unskipped update does."""
    config = OptimConfig(lr=1e-2, kl_coef=0.0, mini_batches=2, micro_batch_size=4)
    model = _model()
    steps = _steps()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    signal = _advantages()[:, None] * steps.loss_mask.float()
    old = score_steps(model, steps, micro_batch_size=4)
    ppo_update(model, optimizer, PPOBatch(steps, old, signal), config, torch.Generator())
    before = copy.deepcopy(model.state_dict())
    stats = ppo_update(model, optimizer, PPOBatch(steps, old, torch.zeros_like(signal)), config,
                       torch.Generator())
    assert stats["ppo/trained_rows"] == 0.0 and "ppo/grad_norm" in stats
    moved = [name for name, weight in model.state_dict().items()
             if not torch.equal(weight, before[name])]
    assert moved  # momentum and weight decay, exactly as zero gradients give


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_statistics_are_token_means_over_the_rows_trained_on(temperature):
    """One mini-batch scored by the model it updates, at the temperature it trains at: every
    trained token's ratio is exactly 1, so the mean ratio is 1, however many silent rows the
    mini-batch held."""
    config = OptimConfig(lr=1e-2, kl_coef=0.0, mini_batches=1, micro_batch_size=4)
    model = _model()
    steps = _steps()
    advantages = _advantages()[:, None] * steps.loss_mask.float()
    old = score_steps(model, steps, micro_batch_size=4, temperature=temperature)
    stats = ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.5),
                       PPOBatch(steps, old, advantages), config, torch.Generator(),
                       temperature=temperature)
    assert stats["ppo/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert stats["ppo/approx_kl"] == pytest.approx(0.0, abs=1e-6)


def test_rollout_weights_give_every_rollout_the_same_total():
    """Hand-worked: rollout 0 has 2 + 3 response tokens, rollout 1 has 1 + 1 + 2; the mean per
    rollout is 4.5, so rollout 0's rows weigh 4.5/5 and rollout 1's 4.5/4."""
    lengths = torch.tensor([2, 3, 1, 1, 2])
    mask = torch.arange(4)[None] < lengths[:, None]
    weights = rollout_weights(mask, torch.tensor([0, 0, 1, 1, 1]))
    assert torch.allclose(weights, torch.tensor([0.9, 0.9, 1.125, 1.125, 1.125]))


def test_rollout_mean_is_token_mean_with_each_rollouts_tokens_summing_alike():
    """Rows 0-1 are one rollout (its tokens counted by hand), rows 2-3 another, the rest a
    third: ``rollout_mean`` must update as ``token_mean`` does on advantages scaled by the
    hand-computed mean tokens per rollout over each rollout's own."""
    steps = _steps()
    step_rollout = torch.tensor([0, 0, 1, 1] + [2] * 8)
    tokens = steps.loss_mask.sum(dim=1).double()
    per_rollout = [tokens[:2].sum(), tokens[2:4].sum(), tokens[4:].sum()]
    mean = sum(per_rollout) / 3
    scale = torch.tensor([float(mean / per_rollout[r]) for r in step_rollout.tolist()])
    rows = torch.tensor([1.5, -0.5, -0.5, -0.5] + [0.25] * 8)

    def update(config, advantage_rows):
        model = _model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        batch = StepTensors(**{**steps.__dict__, "step_rollout": step_rollout})
        old = score_steps(model, batch, micro_batch_size=4)
        ppo_update(model, optimizer,
                   PPOBatch(batch, old, advantage_rows[:, None] * batch.loss_mask.float()),
                   config, torch.Generator())
        return model.state_dict()

    base = {"lr": 0.5, "kl_coef": 0.0, "mini_batches": 1, "micro_batch_size": 4}
    weighted = update(OptimConfig(**base, loss_agg="rollout_mean"), rows)
    by_hand = update(OptimConfig(**base), rows * scale)
    plain = update(OptimConfig(**base), rows)
    for name, weight in weighted.items():
        assert torch.allclose(weight, by_hand[name], atol=1e-6), name
    assert any(not torch.allclose(weight, plain[name], atol=1e-6)
               for name, weight in weighted.items())


def test_rollout_mean_leaves_the_kl_and_entropy_terms_token_means():
    """With every advantage 0 only the KL and entropy terms act: ``rollout_mean`` (rows 0-1,
    2-3 and 4-11 three rollouts of unequal token counts) must update exactly as
    ``token_mean``, since it reweights the policy-gradient term alone."""
    steps = _steps()
    batch = StepTensors(**{**steps.__dict__,
                           "step_rollout": torch.tensor([0, 0, 1, 1] + [2] * 8)})
    reference = torch.where(batch.loss_mask, -1.0, 0.0)  # [S, L] ℓ_ref away from ℓ^b

    def update(loss_agg):
        model = _model()
        old = score_steps(model, batch, micro_batch_size=4)
        ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.5),
                   PPOBatch(batch, old, torch.zeros(ROWS, LENGTH), reference),
                   OptimConfig(lr=0.5, kl_coef=0.1, entropy_coef=0.01, mini_batches=1,
                               micro_batch_size=4, loss_agg=loss_agg), torch.Generator())
        return model.state_dict()

    weighted, plain, start = update("rollout_mean"), update("token_mean"), _model().state_dict()
    assert any(not torch.equal(weight, start[name]) for name, weight in plain.items())
    for name, weight in weighted.items():
        assert torch.equal(weight, plain[name]), name


def test_every_per_token_tensor_reaches_the_loss_under_its_own_name(monkeypatch):
    """With the reference, the teacher and the allowed sets all set, each micro-batch's loss
    reads the reference as ``ref`` and the teacher as the auxiliary loss's target: the rows
    of the tensors passed in, trimmed as the micro-batch's ids are."""
    from agentcredit.train import ppo

    steps = _steps()
    steps = StepTensors(**{**steps.__dict__,
                           "allowed": torch.full((ROWS, LENGTH, 1), -1, dtype=torch.long)})
    model = _model()
    old = score_steps(model, steps, micro_batch_size=4)
    ref, teacher = old - 0.25 * steps.loss_mask, old - 0.5 * steps.loss_mask
    seen = {"ref": [], "teacher": []}
    loss, aux = ppo.ppo_loss, get_aux_loss("opsd")

    def spy_loss(logprobs, old, ref, *args, **kwargs):
        seen["ref"].append((old, ref))
        return loss(logprobs, old, ref, *args, **kwargs)

    def spy_aux(logprobs, teacher, old, *args):
        seen["teacher"].append((old, teacher))
        return aux.fn(logprobs, teacher, old, *args)

    monkeypatch.setattr(ppo, "ppo_loss", spy_loss)
    monkeypatch.setattr(ppo, "get_aux_loss", lambda name: dataclasses.replace(aux, fn=spy_aux))
    config = OptimConfig(lr=1e-2, kl_coef=0.1, mini_batches=2, micro_batch_size=4,
                         aux_loss="opsd", aux_coef=0.5)
    ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.0),
               PPOBatch(steps, old, _advantages()[:, None] * steps.loss_mask.float(), ref,
                        teacher), config, torch.Generator())
    assert len(seen["ref"]) == len(seen["teacher"]) == 4
    for name, shift in (("ref", 0.25), ("teacher", 0.5)):
        for old_rows, rows in seen[name]:
            assert torch.allclose(old_rows - rows, shift * (old_rows - rows != 0)), name
            assert (old_rows - rows != 0).any(), name
