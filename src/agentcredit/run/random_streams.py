"""A run's random streams, saved with each checkpoint (docs/design.md,
"Run directory and crash safety").

``RandomStreams`` holds the task-sampling ``random.Random``, a ``torch.Generator`` for token
sampling on the policy's device and a CPU one for mini-batch shuffles (on a CPU run the two
are one generator); the global python, numpy and torch states are saved and restored with
them, since code that takes no generator of its own (a library's weight initialisation or
dropout) draws from those. ``seed_global_generators`` seeds the global ones. A run killed and
resumed on the same device therefore draws what an uninterrupted one draws.

A saved state splits in two (``RandomStreams.state``): the streams of ``TENSOR_STREAMS``
are tensors (a checkpoint's ``trainer_state.pt``), those of ``JSON_STREAMS`` plain JSON
data (its ``trainer_state.json``). ``takes_states`` tries a saved state on fresh generators,
so a checkpoint is checked before any live stream changes. A state saved before the token and
shuffle streams were split lacks ``shuffling`` and ``sampling_device``: its ``sampling`` was the
CPU generator of both, and it still loads. torch is imported inside the functions that use
it: importing ``run/`` loads none.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

TENSOR_STREAMS = ("sampling", "shuffling", "torch_random")
"""The streams whose saved states are tensors (``torch.Generator.get_state()``: a CPU uint8
tensor whatever the generator's device)."""
JSON_STREAMS = ("task_rng", "python_random", "numpy_random", "sampling_device")
"""The streams whose saved states are plain JSON data, with the device type the ``sampling``
state belongs to (``"cpu"``, ``"cuda"``)."""
OPTIONAL_STREAMS = ("shuffling", "sampling_device")
"""Entries a state saved before the token and shuffle streams were split lacks."""


def seed_global_generators(seed: int) -> None:
    """Seed python's, numpy's and torch's global generators with ``seed``: code that takes no
    generator of its own (a library's weight initialisation or dropout) draws from them, and
    draws the same under the same seed."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass
class RandomStreams:
    """Every random stream of a run.

    Attributes:
        task_rng: task sampling.
        sampling: token sampling (``HFPolicy.generate``), on the policy's device.
        shuffling: mini-batch shuffles (``torch.randperm``), a CPU generator; ``None`` given, the
            ``sampling`` generator, which must then be a CPU one.
    The global python / numpy / torch states are saved and restored with them.
    """

    task_rng: random.Random
    sampling: torch.Generator
    shuffling: torch.Generator | None = None

    def __post_init__(self) -> None:
        if self.shuffling is None:
            if self.sampling.device.type != "cpu":
                raise ValueError(f"the token stream is on {self.sampling.device}; pass a CPU "
                                 "generator as shuffling (torch.randperm draws on the CPU)")
            self.shuffling = self.sampling

    @classmethod
    def seeded(cls, seed: int, device: str = "cpu") -> RandomStreams:
        """Fresh streams of ``seed``, the token stream on ``device`` (``run.device``: ``cpu``,
        ``cuda``, ``cuda:1``); the global generators are left as they are
        (``seed_global_generators`` seeds them). On the CPU one generator samples the tokens
        and shuffles the mini-batches, as before the streams were split, so CPU runs draw what
        they drew."""
        import torch

        shuffling = torch.Generator().manual_seed(seed)
        if torch.device(device).type == "cpu":
            return cls(random.Random(seed), shuffling)
        return cls(random.Random(seed), torch.Generator(device).manual_seed(seed), shuffling)

    def state(self) -> dict[str, Any]:
        """Everything ``restore`` needs, one entry per stream: tensors (``TENSOR_STREAMS``)
        and plain JSON data (``JSON_STREAMS``)."""
        import torch

        numpy_state = np.random.get_state(legacy=False)
        numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
        return {"task_rng": self.task_rng.getstate(), "sampling": self.sampling.get_state(),
                "sampling_device": self.sampling.device.type,
                "shuffling": self.shuffling.get_state(),
                "python_random": random.getstate(), "numpy_random": numpy_state,
                "torch_random": torch.get_rng_state()}

    def restore(self, state: dict[str, Any]) -> None:
        """Set every stream to a saved ``state`` (as ``state`` gave it, or read back from
        JSON, where tuples are lists).

        The token stream takes its saved state only when it was saved on a device of the same
        type (a CUDA generator's state is no CPU generator's); otherwise it keeps its seeded
        state, since draws on another device differ anyway. A state without ``shuffling``
        (saved before the streams were split) gives its CPU ``sampling`` state to the shuffles.
        """
        import torch

        self.task_rng.setstate(_python_state(state["task_rng"]))
        self.shuffling.set_state(state.get("shuffling", state["sampling"]))
        if (self.sampling is not self.shuffling
                and state.get("sampling_device", "cpu") == self.sampling.device.type):
            self.sampling.set_state(state["sampling"])
        random.setstate(_python_state(state["python_random"]))
        np.random.set_state(state["numpy_random"])
        torch.set_rng_state(state["torch_random"])


def takes_states(state: Any, streams: Sequence[str]) -> bool:
    """Whether a generator of each of ``streams`` takes its entry of the saved ``state`` (as
    ``RandomStreams.state`` gave it, or read back from JSON); each is tried on a fresh
    generator, so no stream of the run changes. False for a missing entry (but one of
    ``OPTIONAL_STREAMS``) or a ``state`` that is not a mapping. The token stream's state is
    tried on a generator of the device type it was saved on (``sampling_device``, CPU when
    absent); where this machine lacks that device it is only checked to be a generator
    state's byte tensor, since ``restore`` then leaves the token stream seeded."""
    if not isinstance(state, Mapping):
        return False
    try:
        for stream in streams:
            if stream not in state:
                if stream in OPTIONAL_STREAMS:
                    continue
                return False
            if stream == "sampling":
                _try_torch(state[stream], state.get("sampling_device", "cpu"))
            else:
                _TRY_STATE[stream](state[stream])
    except (KeyError, TypeError, ValueError, OverflowError, IndexError, RuntimeError):
        return False
    return True


def _python_state(state: Any) -> tuple:
    """``random.getstate()``'s tuple, from itself or its JSON list."""
    version, internal, gauss = state
    return version, tuple(internal), gauss


def _try_python(state: Any) -> None:
    random.Random().setstate(_python_state(state))


def _try_numpy(state: Any) -> None:
    np.random.RandomState().set_state(state)


def _try_torch(state: Any, device: str = "cpu") -> None:
    import torch

    _try_device(device)
    try:
        generator = torch.Generator(device)
    except RuntimeError:  # a device type this machine lacks
        if not (isinstance(state, torch.Tensor) and state.dtype == torch.uint8
                and state.dim() == 1 and state.numel()):
            raise TypeError("a generator state is a 1-D uint8 tensor") from None
        return
    generator.set_state(state)


def _try_device(device: Any) -> None:
    import torch

    if not isinstance(device, str) or torch.device(device).type != device:
        raise ValueError(f"{device!r} is no device type")


_TRY_STATE: dict[str, Callable[[Any], None]] = {
    "task_rng": _try_python, "python_random": _try_python, "numpy_random": _try_numpy,
    "shuffling": _try_torch, "torch_random": _try_torch, "sampling_device": _try_device}
