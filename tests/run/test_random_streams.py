"""A run's random streams (run/random_streams.py): seeding repeats the global draws, fresh
streams leave the global generators alone, a saved state read back from JSON restores every
stream's draws, and a state a generator refuses is found before any stream changes. On the
CPU one generator samples tokens and shuffles (as before the streams were split); a token
stream on another device keeps its own state beside a CPU shuffle stream, and a state saved
before the split still loads."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from agentcredit.run.random_streams import (
    JSON_STREAMS,
    TENSOR_STREAMS,
    RandomStreams,
    seed_global_generators,
    takes_states,
)


def _global_draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def _draws(streams: RandomStreams) -> tuple:
    return (streams.task_rng.random(),
            int(torch.randint(1 << 30, (), generator=streams.sampling,
                              device=streams.sampling.device)),
            int(torch.randint(1 << 30, (), generator=streams.shuffling)), *_global_draws())


def test_seeding_the_global_generators_repeats_their_draws():
    seed_global_generators(7)
    first = _global_draws()
    seed_global_generators(7)
    assert _global_draws() == first
    seed_global_generators(8)
    assert _global_draws() != first


def test_fresh_streams_leave_the_global_generators_alone():
    seed_global_generators(7)
    expected = _global_draws()
    seed_global_generators(7)
    streams = RandomStreams.seeded(0)
    assert _global_draws() == expected
    assert streams.task_rng.random() == random.Random(0).random()


def test_a_state_read_back_from_json_restores_every_streams_draws():
    seed_global_generators(3)
    streams = RandomStreams.seeded(3)
    _draws(streams)
    state = streams.state()
    assert set(state) == {*TENSOR_STREAMS, *JSON_STREAMS}
    saved = {**json.loads(json.dumps({k: state[k] for k in JSON_STREAMS})),
             **{k: state[k] for k in TENSOR_STREAMS}}  # as a checkpoint splits and reads it
    expected = _draws(streams)
    seed_global_generators(4)
    other = RandomStreams.seeded(4)
    other.restore(saved)
    assert _draws(other) == expected


def test_a_state_its_generator_refuses_is_not_taken_and_nothing_changes():
    state = RandomStreams.seeded(0).state()
    assert takes_states(state, (*JSON_STREAMS, *TENSOR_STREAMS))
    seed_global_generators(5)
    expected = _global_draws()
    seed_global_generators(5)
    for stream, bad in [("task_rng", [3, [1, 2], None]), ("numpy_random", {"state": 1}),
                        ("sampling", torch.zeros(3, dtype=torch.uint8)), ("torch_random", "x")]:
        assert not takes_states({**state, stream: bad}, [stream]), stream
    assert not takes_states({}, JSON_STREAMS)
    assert not takes_states(None, TENSOR_STREAMS)
    assert _global_draws() == expected  # trying states changed no global generator


def test_a_cpu_run_samples_and_shuffles_with_one_generator_as_before():
    streams = RandomStreams.seeded(3)
    assert streams.shuffling is streams.sampling
    expected = torch.randperm(9, generator=torch.Generator().manual_seed(3))
    assert torch.equal(torch.randperm(9, generator=streams.shuffling), expected)


def test_a_state_saved_before_the_split_restores_the_shuffles():
    streams = RandomStreams.seeded(3)
    _draws(streams)
    state = streams.state()
    old = {k: v for k, v in state.items() if k not in ("shuffling", "sampling_device")}
    assert takes_states(old, (*JSON_STREAMS, *TENSOR_STREAMS))
    expected = _draws(streams)
    other = RandomStreams.seeded(4)
    other.restore(old)
    assert _draws(other) == expected


def test_a_token_stream_saved_on_a_device_this_machine_lacks_is_checked_by_shape_only():
    state = {**RandomStreams.seeded(0).state(), "sampling_device": "cuda",
             "sampling": torch.zeros(16, dtype=torch.uint8)}  # a CUDA Philox state's size
    assert takes_states(state, (*JSON_STREAMS, *TENSOR_STREAMS))
    for bad in [{"sampling_device": "gpu"}, {"sampling_device": 3},
                {"sampling": torch.zeros(16)}, {"sampling": "x"}]:
        assert not takes_states({**state, **bad}, (*JSON_STREAMS, *TENSOR_STREAMS)), bad
    if not torch.cuda.is_available():  # restoring keeps the CPU token stream as seeded
        streams = RandomStreams.seeded(5)
        streams.restore(state)
        expected = RandomStreams.seeded(0)
        assert torch.equal(streams.shuffling.get_state(), expected.shuffling.get_state())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_token_stream_round_trips_beside_its_cpu_shuffles():
    streams = RandomStreams.seeded(3, device="cuda")
    assert streams.sampling.device.type == "cuda" and streams.shuffling.device.type == "cpu"
    _draws(streams)
    state = streams.state()
    assert state["sampling_device"] == "cuda" and takes_states(state, (*JSON_STREAMS,
                                                                       *TENSOR_STREAMS))
    saved = {**json.loads(json.dumps({k: state[k] for k in JSON_STREAMS})),
             **{k: state[k] for k in TENSOR_STREAMS}}
    expected = _draws(streams)
    other = RandomStreams.seeded(4, device="cuda")
    other.restore(saved)
    assert _draws(other) == expected


def test_a_token_stream_of_its_own_round_trips_beside_its_shuffles_on_the_cpu():
    """The path a CUDA run takes (a token generator beside the CPU shuffle stream), held on
    the CPU with two CPU generators: each comes back to its own saved state."""
    def split(seed: int) -> RandomStreams:
        return RandomStreams(random.Random(seed), torch.Generator().manual_seed(seed),
                             torch.Generator().manual_seed(seed + 100))

    streams = split(3)
    assert streams.sampling is not streams.shuffling
    _draws(streams)
    state = streams.state()
    saved = {**json.loads(json.dumps({k: state[k] for k in JSON_STREAMS})),
             **{k: state[k] for k in TENSOR_STREAMS}}
    expected = _draws(streams)
    other = split(4)
    other.restore(saved)
    assert _draws(other) == expected
