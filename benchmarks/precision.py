"""Mixed precision against float32 and against AdamW on bfloat16 weights (issue 63).

From one random-init Qwen2 start, the same PPO updates (``train.ppo.ppo_update``, prefix
trees, AdamW at the ``hf`` preset's ``lr = 1e-6``) and the same SFT steps
(``train.warm_start.sft.run_sft``) run three ways:

- ``float32``: float32 weights, float32 compute (the reference);
- ``mixed``: float32 weights, bfloat16 autocast (``train/precision.py``, what
  ``model.dtype=bfloat16`` now does to the trained policy);
- ``bf16_weights``: the weights themselves in bfloat16 (what ``model.dtype=bfloat16`` did
  before: AdamW over bfloat16 weights).

For each, against ``float32``: the cosine of the weight changes ``Δθ``, the share of weight
entries that moved at all, and the mean ``|Δθ|`` over float32's. Then the scorer gap: the
mean and largest ``|ℓ − ℓ_fp32|`` of a bfloat16 scorer (weights in bfloat16, as a frozen
reference is held) and of the mixed scorer, each with and without ``model.fp32_lm_head``.

    python benchmarks/precision.py [--quick]
"""

from __future__ import annotations

import copy

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from agentcredit.config import OptimConfig, SFTConfig
from agentcredit.envs.base import Task
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.ppo import PPOBatch, ppo_update
from agentcredit.train.precision import mixed_precision
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.step_tensors import tensorize_steps
from agentcredit.train.warm_start.sft import run_sft
from bench_common import BenchmarkParser, run_script, write_result

MODES = ("float32", "mixed", "bf16_weights")


def model_of(size: dict) -> Qwen2ForCausalLM:
    """A random-init Qwen2 of ``size`` (initializer range 0.02, float32, seed 0)."""
    torch.manual_seed(0)
    return Qwen2ForCausalLM(Qwen2Config(**size, max_position_embeddings=512,
                                        tie_word_embeddings=True)).float()


def trajectories(vocab: int, count: int, steps: int, seed: int = 1) -> list[Trajectory]:
    """``count`` trajectories of ``steps`` steps whose prompts grow by each step's response and
    a new observation, as a rollout's do (so the prefix trees have trunks)."""
    g = torch.Generator().manual_seed(seed)

    def ids(n: int) -> list[int]:
        return torch.randint(3, vocab, (n,), generator=g).tolist()

    out = []
    for k in range(count):
        task = Task(f"t{k}", "fake", "train", "take the apple", "type0")
        trajectory, prompt = Trajectory(task=task, group_id=k // 2), ids(24)
        for _ in range(steps):
            response = ids(8)
            trajectory.steps.append(Step("obs", "go", "go", True, 0.0, "obs", {}, list(prompt),
                                         response, [0.0] * len(response)))
            prompt += response + ids(6)
        out.append(trajectory)
    return out


def as_mode(model: Qwen2ForCausalLM, mode: str, fp32_lm_head: bool = False):
    """A copy of ``model`` in ``mode``."""
    copied = copy.deepcopy(model)
    if mode == "mixed":
        return mixed_precision(copied, torch.bfloat16, fp32_lm_head)
    if mode == "bf16_weights":
        return mixed_precision(copied.to(torch.bfloat16), torch.bfloat16, fp32_lm_head)
    return copied


def ppo_changes(start, data, updates: int) -> dict[str, torch.Tensor]:
    """``Δθ`` (float32, flattened) of ``updates`` PPO updates in each mode."""
    steps = tensorize_steps(data, pad_id=0)
    g = torch.Generator().manual_seed(2)
    advantages = torch.randn(steps.input_ids.shape[0], generator=g)[:, None] * \
        steps.loss_mask.float()
    config = OptimConfig(lr=1e-6, kl_coef=0.0, entropy_coef=0.01, mini_batches=2,
                         micro_batch_size=4)
    out = {}
    for mode in MODES:
        model = as_mode(start, mode)
        before = _weights(model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr,
                                      weight_decay=config.weight_decay)
        for update in range(updates):
            model.eval()
            old = score_steps(model, steps, 8)
            model.train()
            ppo_update(model, optimizer, PPOBatch(steps, old, advantages), config,
                       torch.Generator().manual_seed(update))
        out[mode] = _weights(model) - before
    return out


def sft_changes(start, data, epochs: float) -> dict[str, torch.Tensor]:
    """``Δθ`` of the SFT warm start at ``lr = 1e-6`` in each mode."""
    config = SFTConfig(epochs=epochs, lr=1e-6, batch_size=16, micro_batch_size=8)
    out = {}
    for mode in MODES:
        model = as_mode(start, mode)
        before = _weights(model)
        run_sft(model, data, 0, config, torch.Generator().manual_seed(3))
        out[mode] = _weights(model) - before
    return out


def _weights(model) -> torch.Tensor:
    """Every parameter of ``model``, flattened, in float32 (a bfloat16 model's change is
    measured from its own rounded start)."""
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


def compare(changes: dict[str, torch.Tensor]) -> dict[str, dict[str, float]]:
    """Each mode's ``Δθ`` against float32's: cosine, share moved, mean step ratio."""
    reference = changes["float32"]
    return {mode: {"cosine": float(torch.nn.functional.cosine_similarity(delta, reference, 0)),
                   "share_moved": float((delta != 0).double().mean()),
                   "mean_step_over_float32": float(delta.abs().mean() / reference.abs().mean())}
            for mode, delta in changes.items()}


def scorer_gaps(start, data) -> dict[str, dict[str, float]]:
    """``|ℓ − ℓ_fp32|`` over the response tokens, mean and max, per scorer."""
    steps = tensorize_steps(data, pad_id=0)
    mask = steps.loss_mask
    exact = score_steps(start.eval(), steps, 8)
    out = {}
    for mode in ("mixed", "bf16_weights"):
        for head in (False, True):
            gap = (score_steps(as_mode(start, mode, head).eval(), steps, 8) - exact)[mask].abs()
            out[f"{mode}{'_fp32_head' if head else ''}"] = {"mean": float(gap.mean()),
                                                             "max": float(gap.max())}
    return out


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller model and batch")
    args = parser.parse_args()
    size = {"vocab_size": 4096, "hidden_size": 256, "intermediate_size": 768,
            "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2}
    if args.quick:
        size = {**size, "vocab_size": 512, "hidden_size": 64, "intermediate_size": 192,
                "num_hidden_layers": 2, "num_attention_heads": 4}
    start = model_of(size)
    data = trajectories(size["vocab_size"], count=8 if args.quick else 16, steps=4)
    updates, epochs = (2, 2.0) if args.quick else (5, 5.0)
    metrics = {"ppo": compare(ppo_changes(start, data, updates)),
               "sft": compare(sft_changes(start, data, epochs)),
               "scorer_gap_nats": scorer_gaps(start, data)}
    for part in ("ppo", "sft"):
        for mode, row in metrics[part].items():
            print(f"{part:4s} {mode:13s} " + "  ".join(f"{k} {v:.4f}" for k, v in row.items()))
    for scorer, gap in metrics["scorer_gap_nats"].items():
        print(f"scorer {scorer:24s} mean {gap['mean']:.5f}  max {gap['max']:.5f}")
    path = write_result(
        "precision", {"model": size, "trajectories": len(data), "steps_each": 4,
                      "ppo_updates": updates, "sft_epochs": epochs, "lr": 1e-6},
        metrics, {"mixed cosine of Δθ vs float32": ">= 0.99",
                  "mixed share of entries moved": ">= 0.95"},
        "float32 weights with bfloat16 autocast (mixed) against float32 and against AdamW on "
        "bfloat16 weights, from one start, on CPU", args.quick)
    print(f"wrote {path}")


if __name__ == "__main__":
    run_script(main)
