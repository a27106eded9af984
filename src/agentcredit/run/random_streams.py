"""A run's random streams, saved with each checkpoint (docs/design.md,
"Run directory and crash safety").

``RandomStreams`` holds the task-sampling ``random.Random`` and a CPU ``torch.Generator``
for token sampling and mini-batch shuffles; the global python, numpy and torch states are
saved and restored with them, since code that takes no generator of its own (a library's
weight initialisation or dropout) draws from those. ``seed_global_generators`` seeds the
global ones. A run killed and resumed therefore draws what an uninterrupted one draws.

A saved state splits in two (``RandomStreams.state``): the streams of ``TENSOR_STREAMS``
are tensors (a checkpoint's ``trainer_state.pt``), those of ``JSON_STREAMS`` plain JSON
data (its ``trainer_state.json``). ``takes_states`` tries a saved state on fresh generators,
so a checkpoint is checked before any live stream changes. torch is imported inside the
functions that use it: importing ``run/`` loads none.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

TENSOR_STREAMS = ("sampling", "torch_random")
"""The streams whose saved states are tensors."""
JSON_STREAMS = ("task_rng", "python_random", "numpy_random")
"""The streams whose saved states are plain JSON data."""


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
        sampling: a CPU generator for token sampling and mini-batch shuffles.
    The global python / numpy / torch states are saved and restored with them.
    """

    task_rng: random.Random
    sampling: torch.Generator

    @classmethod
    def seeded(cls, seed: int) -> RandomStreams:
        """Fresh streams of ``seed``; the global generators are left as they are
        (``seed_global_generators`` seeds them)."""
        import torch

        return cls(random.Random(seed), torch.Generator().manual_seed(seed))

    def state(self) -> dict[str, Any]:
        """Everything ``restore`` needs, one entry per stream: tensors (``TENSOR_STREAMS``)
        and plain JSON data (``JSON_STREAMS``)."""
        import torch

        numpy_state = np.random.get_state(legacy=False)
        numpy_state["state"]["key"] = numpy_state["state"]["key"].tolist()
        return {"task_rng": self.task_rng.getstate(), "sampling": self.sampling.get_state(),
                "python_random": random.getstate(), "numpy_random": numpy_state,
                "torch_random": torch.get_rng_state()}

    def restore(self, state: dict[str, Any]) -> None:
        """Set every stream to a saved ``state`` (as ``state`` gave it, or read back from
        JSON, where tuples are lists)."""
        import torch

        self.task_rng.setstate(_python_state(state["task_rng"]))
        self.sampling.set_state(state["sampling"])
        random.setstate(_python_state(state["python_random"]))
        np.random.set_state(state["numpy_random"])
        torch.set_rng_state(state["torch_random"])


def takes_states(state: Any, streams: Sequence[str]) -> bool:
    """Whether a generator of each of ``streams`` takes its entry of the saved ``state`` (as
    ``RandomStreams.state`` gave it, or read back from JSON); each is tried on a fresh
    generator, so no stream of the run changes. False for a missing entry or a ``state``
    that is not a mapping."""
    try:
        for stream in streams:
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


def _try_torch(state: Any) -> None:
    import torch

    torch.Generator().set_state(state)


_TRY_STATE: dict[str, Callable[[Any], None]] = {
    "task_rng": _try_python, "python_random": _try_python, "numpy_random": _try_numpy,
    "sampling": _try_torch, "torch_random": _try_torch}
