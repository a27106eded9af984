"""HFPolicy: batched left-padded sampling whose log-probs are the model's, stopping at eos;
sample_token's one-uniform-per-row inverse-CDF draws follow the exact tempered softmax and
never draw a masked id."""

from __future__ import annotations

import math

import pytest
import torch

from agentcredit.rollout.admissible import ActionTrie, restrict_logits
from agentcredit.rollout.policy import (
    CDF_BLOCK,
    HFPolicy,
    PolicyDiverged,
    PromptCache,
    inverse_cdf,
    sample_token,
)
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.train.model_loading import load_policy
from agentcredit.train.scoring.behaviour_pass import score_steps
from agentcredit.train.step_tensors import tensorize_steps


@pytest.fixture(scope="module")
def policy(fake_model_dir):
    model, tokenizer = load_policy(str(fake_model_dir))
    return HFPolicy(model, tokenizer)


def _prompts(tokenizer):
    return [tokenizer.encode(text, add_special_tokens=False)
            for text in ["You are in room 1.", "go left", "Nothing happens. You see an apple."]]


def test_batched_greedy_decoding_equals_one_prompt_at_a_time(policy):
    prompts = _prompts(policy.tokenizer)
    gen = torch.Generator()
    batched = policy.generate(prompts, temperature=0, max_new_tokens=6, generator=gen)
    single = [policy.generate([p], temperature=0, max_new_tokens=6, generator=gen)[0]
              for p in prompts]
    assert [g.token_ids for g in batched] == [g.token_ids for g in single]
    for b, s in zip(batched, single, strict=True):
        assert b.logprobs == pytest.approx(s.logprobs, abs=1e-4)


def test_sampling_is_reproducible_from_the_generator(policy):
    prompts = _prompts(policy.tokenizer)
    first = policy.generate(prompts, temperature=1.0, max_new_tokens=8,
                            generator=torch.Generator().manual_seed(3))
    second = policy.generate(prompts, temperature=1.0, max_new_tokens=8,
                             generator=torch.Generator().manual_seed(3))
    assert [g.token_ids for g in first] == [g.token_ids for g in second]


def test_sampling_logprobs_match_the_scored_logprobs_at_temperature_one(policy):
    prompts = _prompts(policy.tokenizer)
    gens = policy.generate(prompts, temperature=1.0, max_new_tokens=8,
                           generator=torch.Generator().manual_seed(0))
    traj = Trajectory(task=None, group_id=0, steps=[
        Step("", g.text, None, False, 0.0, "", {}, list(p), g.token_ids, g.logprobs)
        for p, g in zip(prompts, gens, strict=True)])
    steps = tensorize_steps([traj], policy.tokenizer.pad_token_id)
    scored = score_steps(policy.model, steps, 4)
    # equal up to the masked spare vocabulary rows, which hold almost no mass
    assert torch.allclose(scored[steps.loss_mask], steps.sampling_logprobs[steps.loss_mask],
                          atol=0.05)


def test_a_response_stops_at_the_first_stop_token(policy):
    gens = policy.generate(_prompts(policy.tokenizer), temperature=1.0, max_new_tokens=40,
                           generator=torch.Generator().manual_seed(2))  # a seed where one stops
    stopped = 0
    for g in gens:
        stops = [i for i, t in enumerate(g.token_ids) if t in policy.stop_ids]
        if stops:  # the stop token ends the response
            assert stops == [len(g.token_ids) - 1]
            stopped += 1
        else:  # no stop token: the response ran to the limit
            assert len(g.token_ids) == 40
        assert len(g.logprobs) == len(g.token_ids)
        assert all(t < len(policy.tokenizer) for t in g.token_ids)
    assert stopped, "no response stopped, so the rule went untested"


def test_the_longest_shared_prefix_is_found_among_the_cached_prompts():
    cache = PromptCache()
    cache.prompts = torch.tensor([[1, 2, 3, -1], [1, 2, 4, 5]])
    entry, shared = cache.longest_prefixes(torch.tensor([[1, 2, 4, 5, 6], [1, 2, 3, -1, -1],
                                                         [7, 8, -1, -1, -1]]))
    assert entry[:2].tolist() == [1, 0]
    assert shared.tolist() == [4, 3, 0]


def test_an_empty_prompt_cache_shares_nothing():
    _, shared = PromptCache().longest_prefixes(torch.tensor([[1, 2], [3, -1]]))
    assert shared.tolist() == [0, 0]


def _generate_recording_prefills(policy, prompts, **kwargs) -> tuple[list, list[tuple]]:
    """``policy.generate`` that also returns the ``(rows, width)`` of each prefill forward."""
    shapes, forward, prefill, inside = [], policy.model.forward, policy._prefill, []

    def spy(*args, **kw):
        if inside:
            shapes.append(tuple(kw["input_ids"].shape))
        return forward(*args, **kw)

    def recorded_prefill(*args, **kw):
        inside.append(True)
        try:
            return prefill(*args, **kw)
        finally:
            inside.pop()
    policy.model.forward, policy._prefill = spy, recorded_prefill
    try:
        return policy.generate(prompts, **kwargs), shapes
    finally:
        del policy.model.forward, policy._prefill


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_prompts_that_extend_cached_ones_prefill_only_their_new_tokens(fake_model_dir,
                                                                         temperature):
    model, tokenizer = load_policy(str(fake_model_dir))
    policy = HFPolicy(model, tokenizer, micro_batch_size=2)  # entries come from two batches
    first = _prompts(tokenizer)
    tail = tokenizer.encode(" Then the door opens.", add_special_tokens=False)
    second = [first[0] + tail, first[2] + tail[:2], tokenizer.encode("A new room.",
                                                                     add_special_tokens=False)]
    cache = PromptCache()
    policy.generate(first, temperature=temperature, max_new_tokens=5,
                    generator=torch.Generator().manual_seed(1), prompt_cache=cache)
    reused, widths = _generate_recording_prefills(
        policy, second, temperature=temperature, max_new_tokens=5,
        generator=torch.Generator().manual_seed(2), prompt_cache=cache)
    full = policy.generate(second, temperature=temperature, max_new_tokens=5,
                           generator=torch.Generator().manual_seed(2))
    # batch 1 (rows 0, 1) prefills the longer tail; batch 2 (row 2) its whole prompt
    assert widths == [(2, len(tail)), (1, len(second[2]))]
    assert [g.token_ids for g in reused] == [g.token_ids for g in full]
    for r, f in zip(reused, full, strict=True):
        assert r.logprobs == pytest.approx(f.logprobs, abs=1e-5)
    # the cache now holds exactly this call's prompts
    assert [row[row >= 0].tolist() for row in cache.prompts] == second


def test_a_prompt_equal_to_a_cached_one_still_prefills_its_last_token(fake_model_dir):
    model, tokenizer = load_policy(str(fake_model_dir))
    policy = HFPolicy(model, tokenizer)
    prompts, cache = _prompts(tokenizer), PromptCache()
    first = policy.generate(prompts, temperature=0, max_new_tokens=4,
                            generator=torch.Generator(), prompt_cache=cache)
    again, widths = _generate_recording_prefills(policy, prompts, temperature=0,
                                                 max_new_tokens=4, generator=torch.Generator(),
                                                 prompt_cache=cache)
    assert widths == [(len(prompts), 1)]
    assert [g.token_ids for g in again] == [g.token_ids for g in first]


def test_a_sliding_window_model_ignores_the_prompt_cache(fake_model_dir):
    model, tokenizer = load_policy(str(fake_model_dir))
    model.config.use_sliding_window = True
    try:
        policy = HFPolicy(model, tokenizer)
        cache = PromptCache()
        policy.generate(_prompts(tokenizer), temperature=0, max_new_tokens=3,
                        generator=torch.Generator(), prompt_cache=cache)
    finally:
        model.config.use_sliding_window = False
    assert cache.prompts is None


def test_a_call_with_no_prompts_keeps_the_cached_ones(policy):
    cache = PromptCache()
    prompts = _prompts(policy.tokenizer)
    policy.generate(prompts, temperature=0, max_new_tokens=2, generator=torch.Generator(),
                    prompt_cache=cache)
    assert policy.generate([], temperature=0, max_new_tokens=2, generator=torch.Generator(),
                           prompt_cache=cache) == []
    assert [row[row >= 0].tolist() for row in cache.prompts] == prompts


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_infinite_logits_give_a_nan_log_prob_and_an_id_in_the_vocabulary(temperature,
                                                                                 bad):
    logits = torch.zeros(2, 5)
    logits[1, 3] = bad
    token, logprob = sample_token(logits, temperature, torch.Generator().manual_seed(0))
    assert not logprob[0].isnan() and logprob[1].isnan()
    assert ((token >= 0) & (token < 5)).all()  # a device would not index out of its table


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_nan_logits_mid_response_raise_policy_diverged_before_the_next_forward(policy,
                                                                             temperature):
    forward, calls = policy.model.forward, []

    def poisoned(*args, **kw):
        calls.append(True)
        output = forward(*args, **kw)
        if len(calls) == 2:  # the first decoding step's forward
            output.logits[1, -1, 4] = float("nan")
        return output
    policy.model.forward = poisoned
    try:
        with pytest.raises(PolicyDiverged, match="probabilities hold NaN"):
            policy.generate(_prompts(policy.tokenizer), temperature=temperature,
                            max_new_tokens=6, generator=torch.Generator().manual_seed(0))
    finally:
        del policy.model.forward
    assert len(calls) == 2
    assert not policy.model.training


def test_masked_logits_still_sample_among_the_allowed_tokens():
    logits = torch.full((1, 5), -torch.inf)
    logits[0, 2] = 0.0
    token, logprob = sample_token(logits, 1.0, torch.Generator().manual_seed(0))
    assert token.tolist() == [2] and logprob.tolist() == [0.0]


def test_a_prompt_repeated_in_a_batch_is_prefilled_once_and_sampled_per_row(policy):
    prompts = _prompts(policy.tokenizer)
    repeated = [prompts[0]] * 4 + [prompts[1]]
    gens, widths = _generate_recording_prefills(policy, repeated, temperature=1.0,
                                                max_new_tokens=6,
                                                generator=torch.Generator().manual_seed(0))
    assert widths == [(2, max(len(prompts[0]), len(prompts[1])))]
    assert len({tuple(g.token_ids) for g in gens[:4]}) > 1  # each row draws its own tokens


@pytest.mark.parametrize("temperature", [1.0, 0.4])
def test_cached_and_repeated_prompts_record_the_log_probs_rescoring_gives(policy, temperature):
    tok = policy.tokenizer
    first = _prompts(tok)
    tail = tok.encode(" Then the door opens.", add_special_tokens=False)
    second = [first[0] + tail, first[0] + tail, first[2],
              tok.encode("go", add_special_tokens=False)]
    commands = ["go left", "go right", "take apple", "open the door"]
    cache, steps = PromptCache(), []
    for seed, prompts in enumerate((first, second)):
        tries = [ActionTrie.from_commands(tok, commands[:k], "bare") for k in (4, 3, 2, 4)]
        gens = policy.generate(prompts, temperature=temperature, max_new_tokens=4,
                               generator=torch.Generator().manual_seed(seed),
                               tries=tries[:len(prompts)], prompt_cache=cache)
        steps += [Step("", g.text, g.text, True, 0.0, "", {}, list(p), g.token_ids, g.logprobs,
                       allowed_ids=g.allowed_ids) for p, g in zip(prompts, gens, strict=True)]
    tensors = tensorize_steps([Trajectory(task=None, group_id=0, steps=steps)],
                              tok.pad_token_id)
    rescored = score_steps(policy.model, tensors, 4, temperature)
    mask = tensors.loss_mask
    assert torch.allclose(rescored[mask], tensors.sampling_logprobs[mask], atol=1e-5)


def _chi_square_upper(dof: int, z: float = 3.0902) -> float:
    """The chi-square quantile of ``dof`` degrees of freedom at upper tail ``Φ(-z)`` (z = 3.09:
    1e-3), by the Wilson–Hilferty approximation (no scipy here)."""
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


def _chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = counts.sum() * probs
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("temperature", [0.6, 1.0, 1.7])
def test_draws_follow_the_exact_tempered_softmax_and_skip_masked_ids(temperature):
    draws, vocab = 6000, 12
    logits = torch.randn(2, vocab, generator=torch.Generator().manual_seed(7))
    masked = torch.tensor([0, 5, 6, 11])  # the first, two inner and the last id
    logits[1, masked] = -torch.inf
    for row in range(2):
        tokens, logprobs = sample_token(logits[row].expand(draws, vocab), temperature,
                                        torch.Generator().manual_seed(11 + row))
        exact = torch.log_softmax(logits[row] / temperature, -1)
        assert torch.allclose(logprobs, exact[tokens])
        counts = torch.bincount(tokens, minlength=vocab).double()
        allowed = exact.isfinite()
        assert counts[~allowed].sum() == 0
        probs = exact[allowed].exp().double()
        dof = int(allowed.sum()) - 1
        assert _chi_square(counts[allowed], probs) < _chi_square_upper(dof)
        if temperature != 1.0:  # the check has the power to see a temperature left out
            untempered = torch.softmax(logits[row][allowed], -1).double()
            assert _chi_square(counts[allowed], untempered) > _chi_square_upper(dof)


def test_a_sample_draws_one_uniform_per_row():
    generator, reference = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    sample_token(torch.zeros(5, 151), 1.0, generator)
    torch.rand(5, 1, dtype=torch.float64, generator=reference)
    assert torch.equal(generator.get_state(), reference.get_state())


def test_no_uniform_selects_an_id_of_probability_zero():
    probs = torch.tensor([[0.0, 0.2, 0.0, 0.0, 0.5, 0.3, 0.0, 0.0]])
    u = torch.cat([torch.linspace(0, 1, 10_001), torch.tensor([1 - 2 ** -53])])[:, None]
    ids, total = inverse_cdf(probs.expand(len(u), -1), u.double())
    assert set(ids.tolist()) == {1, 4, 5}
    assert torch.allclose(total, torch.ones(len(u), dtype=torch.float64))
    assert ids[0] == 1 and ids[-2] == 5 and ids[-1] == 5  # u = 0 and u = 1: the end ids
    # over several blocks of the first level, a whole block and the tail's end at weight 0
    weights = torch.zeros(1, 3 * CDF_BLOCK + 9)
    weights[0, [5, 2 * CDF_BLOCK + 3, 3 * CDF_BLOCK + 2]] = torch.tensor([0.3, 0.5, 0.2])
    ids, _ = inverse_cdf(weights.expand(len(u), -1), u.double())
    assert set(ids.tolist()) == {5, 2 * CDF_BLOCK + 3, 3 * CDF_BLOCK + 2}
    assert ids[0] == 5 and ids[-1] == 3 * CDF_BLOCK + 2


@pytest.mark.parametrize("temperature", [0.0, 0.6])
def test_sampling_among_allowed_ids_is_sampling_the_restricted_softmax(temperature):
    draws, vocab = 6000, 40
    logits = torch.randn(1, vocab, generator=torch.Generator().manual_seed(5)).expand(draws, -1)
    allowed = torch.tensor([[3, 9, 17, 22, 38, -1]]).expand(draws, -1)
    tokens, logprobs = sample_token(logits, temperature, torch.Generator().manual_seed(9),
                                    allowed)
    restricted = torch.log_softmax(restrict_logits(logits, allowed) / (temperature or 1.0), -1)
    assert torch.allclose(logprobs, restricted.gather(-1, tokens[:, None]).squeeze(-1),
                          atol=1e-6)
    if temperature == 0:
        assert (tokens == restricted[0].argmax()).all()
        return
    counts = torch.bincount(tokens, minlength=vocab).double()
    ids = allowed[0, :5]
    assert counts.sum() == counts[ids].sum()
    assert _chi_square(counts[ids], restricted[0, ids].exp().double()) < _chi_square_upper(4)


def test_draws_over_several_blocks_follow_the_softmax():
    draws, vocab = 6000, 3 * CDF_BLOCK + 9
    logits = torch.full((1, vocab), -torch.inf)
    ids = torch.tensor([0, 7, CDF_BLOCK - 1, CDF_BLOCK, 2 * CDF_BLOCK + 40, vocab - 1])
    logits[0, ids] = torch.randn(len(ids), generator=torch.Generator().manual_seed(4))
    tokens, _ = sample_token(logits.expand(draws, -1), 0.8, torch.Generator().manual_seed(6))
    counts = torch.bincount(tokens, minlength=vocab).double()
    assert counts.sum() == counts[ids].sum()
    probs = torch.softmax(logits[0, ids] / 0.8, -1).double()
    assert _chi_square(counts[ids], probs) < _chi_square_upper(len(ids) - 1)
