"""Token sampling's cost per decoding step, old (CPU multinomial) beside new (device inverse-CDF).

Two measurements in one process, alternating old and new (old, new, new, old, ...), medians:

- the sampler alone at Qwen's vocabulary: ``[64, 151936]`` fp32 logits on the CPU, the
  work one decoding step does between the model's logits and the next token ids (masking the
  spare vocabulary rows, for ``admissible`` rows also an allowed set of 1 to 32 ids each,
  then sampling at temperature 1). ``old``: this file's private copy of the sampler before
  issue 63 (``logits.float().cpu()``, a NaN check that syncs, ``torch.multinomial`` from a CPU
  generator: one exponential variate per vocabulary entry); ``new``: ``rollout.policy``'s
  ``sample_token`` (one uniform per row, a two-level inverse CDF; with allowed sets it reads
  only the allowed ids' logits, as ``HFPolicy.generate`` does when every row has a trie).
  Figures: ``sampler_ms`` and ``admissible_ms`` of each, ``*_new_over_old`` (target <= 0.2).
- ``HFPolicy.generate`` of two tiny random Qwen2s (``GENERATE_MODELS``: 2 layers, hidden size
  64 with Qwen's vocabulary, and the embedded default's model, hidden size 128 with 4,096
  ids), 64 prompts of 8 tokens, 16 new tokens each at temperature 1: the working tree's
  policy against ``--baseline REV``'s ``rollout/policy.py`` (read with ``git show`` into a
  temporary file and loaded by path at run time; REV: a commit before issue 63, such as
  c545d6b). Figures: ``{old,new}_generate_tokens_per_s_<model>`` and
  ``generate_new_over_old_<model>``.

    python benchmarks/sampler_cost.py --baseline REV [--repeats R] [--threads N] [--quick]

``--quick``: one repeat, written to ``sampler_cost.quick.json``.
"""

from __future__ import annotations

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from agentcredit.rollout.admissible import pack_sets, restrict_logits
from agentcredit.rollout.policy import HFPolicy, PolicyDiverged, sample_token
from bench_common import BenchmarkParser, at_least, git_revision, run_script, write_result

ROWS, VOCAB, PRODUCIBLE = 64, 151936, 151665  # Qwen2.5's table and the ids its tokenizer writes
PROMPT, NEW_TOKENS = 8, 16
REPO = Path(__file__).resolve().parents[1]


def old_sample_token(logits: torch.Tensor, temperature: float,
                     generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``rollout.policy.sample_token`` before issue 63: one multinomial draw per row."""
    logp = torch.log_softmax(logits / (temperature or 1.0), -1)
    if bool(torch.isnan(logp).any()):
        raise PolicyDiverged("NaN")
    token = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return token, logp.gather(-1, token[:, None]).squeeze(-1)


def old_step(logits: torch.Tensor, sets: list[list[int]] | None,
             generator: torch.Generator) -> torch.Tensor:
    """One decoding step's sampling before issue 63: logits to the host, masks, multinomial."""
    logits = logits.float().cpu()
    logits[:, PRODUCIBLE:] = -torch.inf
    if sets is not None:
        logits = restrict_logits(logits, pack_sets(sets))
    token, _ = old_sample_token(logits, 1.0, generator)
    return token


def new_step(logits: torch.Tensor, sets: list[list[int]] | None,
             generator: torch.Generator) -> torch.Tensor:
    """The same step as ``HFPolicy.generate`` takes it now, on the logits' device; with
    ``sets`` (every row in a trie) each row samples among its allowed ids alone."""
    logits = logits.float()
    logits[:, PRODUCIBLE:] = -torch.inf
    allowed = None if sets is None else pack_sets(sets).to(logits.device, non_blocking=True)
    token, _ = sample_token(logits, 1.0, generator, allowed)
    return token


def time_sampler(repeats: int) -> dict[str, float]:
    """Median milliseconds of one step of each sampler, with and without allowed sets."""
    logits = torch.randn(ROWS, VOCAB, generator=torch.Generator().manual_seed(0)) * 3
    chooser = torch.Generator().manual_seed(1)
    sizes = torch.randint(1, 33, (ROWS,), generator=chooser).tolist()
    sets = [sorted(set(torch.randint(PRODUCIBLE, (size,), generator=chooser).tolist()))
            for size in sizes]
    steps = {"old": old_step, "new": new_step}
    times: dict[str, list[float]] = {f"{name}_{kind}": [] for name in steps
                                     for kind in ("sampler", "admissible")}
    generator = torch.Generator().manual_seed(2)
    for rep in range(repeats):
        for name in (("old", "new") if rep % 2 == 0 else ("new", "old")):
            for kind, allowed in (("sampler", None), ("admissible", sets)):
                began = time.perf_counter()
                steps[name](logits, allowed, generator)
                times[f"{name}_{kind}"].append(1000 * (time.perf_counter() - began))
    return {key: statistics.median(values) for key, values in times.items()}


class _Tokenizer:
    """What ``HFPolicy`` asks of a tokenizer that writes ``producible`` ids and no text."""

    def __init__(self, producible: int) -> None:
        self.producible = producible
        self.eos_token_id, self.pad_token_id = producible - 1, producible - 2

    def __len__(self) -> int:
        return self.producible

    def decode(self, ids, skip_special_tokens=False) -> str:
        return " ".join(map(str, ids))


#: the two models ``generate`` is timed on: (vocabulary, ids the tokenizer writes, hidden size,
#: MLP width): Qwen's vocabulary on a 64-wide model, and the embedded default's tiny model
#: (``TinyModelConfig()``: 4,096 ids, hidden 128, MLP 512)
GENERATE_MODELS = {"qwen_vocab": (VOCAB, PRODUCIBLE, 64, 128), "embedded": (4096, 4096, 128, 512)}


def _tiny_qwen2(vocab: int, tokenizer: _Tokenizer, hidden: int, mlp: int) -> Qwen2ForCausalLM:
    config = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=mlp,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, tie_word_embeddings=True,
                         pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, attn_implementation="sdpa")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Qwen2ForCausalLM(config).eval()


def _baseline_policy(rev: str, folder: Path):
    """``HFPolicy`` of ``rev``'s ``rollout/policy.py``, loaded by path (never committed)."""
    try:
        source = subprocess.run(["git", "show", f"{rev}:src/agentcredit/rollout/policy.py"],
                                cwd=REPO, capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError as err:
        sys.exit(f"--baseline {rev}: git cannot show its rollout/policy.py ({err.stderr.strip()})")
    path = folder / "baseline_policy.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_policy", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["baseline_policy"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.HFPolicy


def time_generate(baseline, repeats: int, model_name: str) -> dict[str, float]:
    """Median tokens per second of ``generate`` under each policy class, on the model
    ``GENERATE_MODELS[model_name]``."""
    vocab, producible, hidden, mlp = GENERATE_MODELS[model_name]
    tokenizer = _Tokenizer(producible)
    model = _tiny_qwen2(vocab, tokenizer, hidden, mlp)
    prompts = torch.randint(producible - 2, (ROWS, PROMPT),
                            generator=torch.Generator().manual_seed(3)).tolist()
    policies = {"old": baseline(model, tokenizer), "new": HFPolicy(model, tokenizer)}
    rates: dict[str, list[float]] = {"old": [], "new": []}
    for rep in range(repeats):
        for name in (("old", "new") if rep % 2 == 0 else ("new", "old")):
            began = time.perf_counter()
            gens = policies[name].generate(prompts, temperature=1.0, max_new_tokens=NEW_TOKENS,
                                           generator=torch.Generator().manual_seed(rep))
            rates[name].append(sum(len(g.token_ids) for g in gens)
                               / (time.perf_counter() - began))
    return {name: statistics.median(values) for name, values in rates.items()}


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, metavar="REV", type=git_revision,
                        help="a commit whose rollout/policy.py samples on the CPU (c545d6b)")
    parser.add_argument("--repeats", type=at_least(1), default=5)
    parser.add_argument("--threads", type=at_least(1), default=1)
    parser.add_argument("--quick", action="store_true", help="one repeat")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        baseline = _baseline_policy(args.baseline, Path(folder))
        sampler = time_sampler(repeats)
        print({k: round(v, 1) for k, v in sampler.items()}, flush=True)
        rates = {name: time_generate(baseline, repeats, name) for name in GENERATE_MODELS}
    metrics = {
        **{f"{key}_ms": round(value, 1) for key, value in sampler.items()},
        "sampler_new_over_old": round(sampler["new_sampler"] / sampler["old_sampler"], 3),
        "admissible_new_over_old": round(sampler["new_admissible"] / sampler["old_admissible"],
                                         3),
        **{f"{age}_generate_tokens_per_s_{name}": round(rate[age], 1)
           for name, rate in rates.items() for age in ("old", "new")},
        **{f"generate_new_over_old_{name}": round(rate["new"] / rate["old"], 2)
           for name, rate in rates.items()},
    }
    path = write_result("sampler_cost", {"rows": ROWS, "vocab": VOCAB, "prompt": PROMPT,
                                         "new_tokens": NEW_TOKENS, "repeats": repeats,
                                         "threads": args.threads, "baseline": args.baseline},
                        metrics, {"sampler_new_over_old": "<= 0.2",
                                  "admissible_new_over_old": "<= 0.2",
                                  "generate_new_over_old_embedded": ">= 1"},
                        "One process, old and new alternating; CPU logits, so 'host cost' is the "
                        "whole sampler step.", quick=args.quick,
                        command=" ".join(["python", "benchmarks/sampler_cost.py", *sys.argv[1:]]))
    print(f"{metrics}\nwrote {path}")


if __name__ == "__main__":
    run_script(main)
