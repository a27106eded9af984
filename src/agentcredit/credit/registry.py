"""The registry of advantage estimators, looked up by name (DESIGN.md "credit/").

An estimator is a pure function ``fn(batch: CreditBatch, config) -> CreditResult``
registered together with its config dataclass::

    @register_estimator("grpo", GRPOConfig)
    def grpo(batch: CreditBatch, config: GRPOConfig) -> CreditResult: ...

    get_estimator("grpo")(batch)  # default config
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.result import CreditResult

EstimatorFn = Callable[[CreditBatch, Any], CreditResult]

@dataclass(frozen=True)
class Estimator:
    """A registered estimator: its name, its function and its config dataclass."""

    name: str
    fn: EstimatorFn
    config_cls: type

    def __call__(self, batch: CreditBatch, config: Any = None) -> CreditResult:
        """Run the estimator; ``config=None`` uses ``config_cls()`` (the SPEC defaults)."""
        if config is None:
            config = self.config_cls()
        elif not isinstance(config, self.config_cls):
            raise TypeError(
                f"estimator {self.name!r} takes a {self.config_cls.__name__}; got "
                f"{type(config).__name__}. Build it with {self.config_cls.__name__}(...)."
            )
        return self.fn(batch, config)


_ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(name: str, config_cls: type) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator: register ``fn`` under ``name`` with its config dataclass; returns ``fn`` unchanged.

    Raises:
        ValueError: ``name`` is empty or already registered.
        TypeError: ``config_cls`` is not a dataclass type.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"estimator name must be a non-empty string; got {name!r}.")
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise TypeError(
            f"estimator {name!r}: config_cls must be a dataclass type; got {config_cls!r}. "
            "Declare the estimator's options with @dataclass (an empty one is fine)."
        )

    def decorator(fn: EstimatorFn) -> EstimatorFn:
        if name in _ESTIMATORS:
            existing = _ESTIMATORS[name].fn
            raise ValueError(
                f"estimator {name!r} is already registered by "
                f"{existing.__module__}.{existing.__qualname__}; pick another name."
            )
        _ESTIMATORS[name] = Estimator(name=name, fn=fn, config_cls=config_cls)
        return fn

    return decorator


def get_estimator(name: str) -> Estimator:
    """The estimator registered under ``name``; a ``KeyError`` lists the known names."""
    try:
        return _ESTIMATORS[name]
    except KeyError:
        raise KeyError(
            f"unknown estimator {name!r}; known estimators: {', '.join(estimator_names())}. "
            "Check the spelling or import the module that registers it."
        ) from None


def estimator_names() -> list[str]:
    """Sorted names of all registered estimators."""
    return sorted(_ESTIMATORS)
