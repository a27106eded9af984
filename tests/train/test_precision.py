"""Mixed precision (train/precision.py): a trained policy keeps float32 weights while its
forwards compute in bfloat16, so AdamW's small updates are not rounded away; frozen copies are
held in bfloat16; the fp32 LM head; float32 runs unchanged; the settings a device cannot do."""

from __future__ import annotations

import copy

import pytest
import torch
from safetensors.torch import load_file
from transformers import Qwen2Config, Qwen2ForCausalLM

from agentcredit.cli import main
from agentcredit.config import ConfigError, OptimConfig, SFTConfig, load_config
from agentcredit.envs.base import Task
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.build import check_device, load_model
from agentcredit.train.ppo import PPOBatch, ppo_update
from agentcredit.train.precision import mixed_precision
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.step_tensors import tensorize_steps
from agentcredit.train.warm_start.sft import run_sft

VOCAB = 256


def _model() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        tie_word_embeddings=True)).float()


def _trajectories() -> list[Trajectory]:
    """Four 3-step trajectories whose prompts grow as a rollout's do (prefix trees)."""
    g = torch.Generator().manual_seed(1)
    out = []
    for k in range(4):
        trajectory = Trajectory(task=Task(f"t{k}", "fake", "train", "go", "type0"), group_id=k)
        prompt = torch.randint(3, VOCAB, (16,), generator=g).tolist()
        for _ in range(3):
            response = torch.randint(3, VOCAB, (6,), generator=g).tolist()
            trajectory.steps.append(Step("obs", "go", "go", True, 0.0, "obs", {}, list(prompt),
                                         response, [0.0] * 6))
            prompt += response + torch.randint(3, VOCAB, (4,), generator=g).tolist()
        out.append(trajectory)
    return out


def _flat(model) -> torch.Tensor:
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


def _ppo_change(model) -> torch.Tensor:
    """``Δθ`` of two PPO updates at the hf preset's lr 1e-6 (entropy bonus: every row trains)."""
    steps = tensorize_steps(_trajectories(), pad_id=0)
    advantages = torch.randn(steps.input_ids.shape[0], generator=torch.Generator().manual_seed(2)
                             )[:, None] * steps.loss_mask.float()
    config = OptimConfig(lr=1e-6, kl_coef=0.0, entropy_coef=0.01, micro_batch_size=4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    before = _flat(model)
    for update in range(2):
        old = score_steps(model, steps, 8)
        ppo_update(model, optimizer, PPOBatch(steps, old, advantages), config,
                   torch.Generator().manual_seed(update))
    return _flat(model) - before


def _sft_change(model) -> torch.Tensor:
    before = _flat(model)
    run_sft(model, _trajectories(), 0, SFTConfig(epochs=2, lr=1e-6, batch_size=6,
                                                 micro_batch_size=3),
            torch.Generator().manual_seed(3))
    return _flat(model) - before


def _agreement(change: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """(cosine of the two ``Δθ``, share of entries ``change`` moved)."""
    return (float(torch.nn.functional.cosine_similarity(change, reference, 0)),
            float((change != 0).double().mean()))


@pytest.mark.parametrize("update", [_ppo_change, _sft_change], ids=["ppo", "sft"])
def test_bfloat16_compute_moves_the_weights_as_float32_does(update):
    """At lr 1e-6 AdamW on bfloat16 weights leaves ~98% of them where they were (its step is
    under half their spacing); float32 weights under bfloat16 autocast move like float32's."""
    reference = update(_model())
    cosine, moved = _agreement(update(mixed_precision(_model(), torch.bfloat16, False)),
                               reference)
    assert cosine >= 0.99 and moved >= 0.95, (cosine, moved)
    cosine, moved = _agreement(update(_model().to(torch.bfloat16)), reference)
    assert cosine < 0.5 and moved < 0.2, (cosine, moved)  # the failure the test guards against


def test_a_float32_model_in_float32_runs_exactly_as_before():
    model = _model()
    plain = copy.deepcopy(model)
    assert mixed_precision(model, torch.float32, fp32_lm_head=True) is model
    assert "forward" not in vars(model) and "forward" not in vars(model.lm_head)
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(4))
    assert torch.equal(model(ids).logits, plain(ids).logits)


def test_autocast_computes_the_layers_in_bfloat16_and_the_fp32_head_in_float32():
    ids = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(4))
    exact = _model()(ids).logits
    seen: list[torch.dtype] = []
    gaps = {}
    for head in (False, True):
        model = mixed_precision(_model(), torch.bfloat16, head)
        model.model.layers[0].mlp.down_proj.register_forward_hook(
            lambda _m, _a, out: seen.append(out.dtype))
        logits = model(ids).logits
        assert logits.dtype == (torch.float32 if head else torch.bfloat16)
        assert next(model.parameters()).dtype == torch.float32
        gaps[head] = float((logits.float() - exact).abs().max())
    assert seen == [torch.bfloat16, torch.bfloat16]
    assert gaps[True] < gaps[False], gaps  # logits not rounded to bfloat16 are closer


@pytest.fixture
def qwen_folder(tmp_path, fake_model_dir):
    """The fake tiny checkpoint (a Qwen2 with a chat template and tokenizer) copied."""
    import shutil

    return shutil.copytree(fake_model_dir, tmp_path / "model")


def test_load_model_holds_a_trained_policy_in_float32_and_a_frozen_copy_in_bfloat16(qwen_folder):
    config = load_config("hf", [f"model.name={qwen_folder}", "run.device=cpu"])
    trained, _ = load_model(config, qwen_folder, training=True)
    frozen, _ = load_model(config, qwen_folder)
    assert {p.dtype for p in trained.parameters()} == {torch.float32}
    assert {p.dtype for p in frozen.parameters()} == {torch.bfloat16}
    ids = torch.tensor([[5, 6, 7]])
    # both compute in bfloat16; the hf preset's fp32 head gives float32 logits to both
    assert trained(ids).logits.dtype == frozen(ids).logits.dtype == torch.float32
    assert (trained(ids).logits - frozen(ids).logits).abs().max() < 0.1


def test_training_in_float16_is_refused_in_one_line():
    config = load_config(None, ["model.dtype=float16"])
    check_device(config)  # evaluating a float16 model is fine
    with pytest.raises(ConfigError, match="model.dtype = 'float16' trains without the loss "
                                          "scaler"):
        check_device(config, training=True)


def test_bfloat16_on_a_gpu_without_it_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    with pytest.raises(ConfigError, match="model.dtype = 'bfloat16' but the GPU cuda cannot"):
        check_device(load_config("hf", ["run.device=cuda"]))


def test_train_refuses_float16_before_writing_anything(tmp_path, capsys):
    status = main(["train", f"run.output_dir={tmp_path}", "run.name=half", "model.dtype=float16"])
    assert status == 2
    assert capsys.readouterr().err.startswith("error: model.dtype = 'float16'")
    assert not (tmp_path / "half").exists()


#: the hf preset on the fake corridor: one small update with an entropy bonus (every token has
#: a gradient), lr 1e-6 as the preset; run.device=cpu
HF_ON_CPU = ("run.device=cpu", "run.progress=false", "run.threads=1", "run.updates=1",
             "run.eval_every=0", "run.checkpoint_every=1", "env=fake",
             "env.train_games_per_type=1", "env.valid_games_per_type=1",
             "env.pool_games_per_type=0", "eval.splits=[]", "rollout.group_size=2",
             "rollout.tasks_per_update=2", "rollout.max_steps=2", "rollout.max_new_tokens=6",
             "rollout.generation_batch_size=4", "rollout.max_prompt_tokens=256",
             "optim.entropy_coef=0.01", "optim.mini_batches=1", "optim.micro_batch_size=4",
             "optim.score_micro_batch_size=4")


def test_the_hf_preset_in_bfloat16_moves_its_weights_as_in_float32(qwen_folder, fake_suite,
                                                                    tmp_path):
    """``train --config hf`` end to end: each run's saved policy against its start."""
    start = load_file(qwen_folder / "model.safetensors")
    moved, saved_dtypes = {}, set()
    for dtype in ("float32", "bfloat16"):
        assert main(["train", "--config", "hf", "--model", str(qwen_folder),
                     f"run.output_dir={tmp_path}", f"run.name={dtype}",
                     f"model.dtype={dtype}", *HF_ON_CPU]) == 0
        saved = load_file(tmp_path / dtype / "checkpoints" / "update_00001" / "policy" /
                          "model.safetensors")
        saved_dtypes |= {w.dtype for w in saved.values()}
        change = torch.cat([(saved[k] - start[k].float()).flatten() for k in start])
        moved[dtype] = (float((change != 0).double().mean()), float(change.abs().mean()))
    (share32, step32), (share16, step16) = moved["float32"], moved["bfloat16"]
    assert share32 > 0.9 and share16 > 0.9, moved
    assert 0.5 < step16 / step32 < 2, moved
    assert saved_dtypes == {torch.float32}  # a resume continues from the float32 weights
