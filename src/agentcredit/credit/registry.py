"""The registry of advantage estimators, looked up by name (docs/design.md, "credit/").

An estimator is a pure function ``fn(batch: CreditBatch, config) -> CreditResult``
registered together with its config dataclass and the inputs its batch must carry::

    @register_estimator("vict", VICTConfig, needs=("traces",))
    def vict(batch: CreditBatch, config: VICTConfig) -> CreditResult: ...

    get_estimator("vict")(batch)  # default config

The trainer prepares what an estimator declares (``INPUTS``) and never branches on an
estimator's name: verifier ``traces`` (``batch.traces``), the privileged ``teacher``'s
per-token scores (``batch.tokens``), HCAPO's ``hindsight`` scores (``batch.hindsight``), and
the ``reference`` policy's per-token log-probs, which travel in ``batch.tokens.ref_logprobs``
beside the teacher's and so are declared together with ``teacher`` (registration refuses
``reference`` alone). A config may ask for more than the estimator's fixed needs through an
``extra_inputs`` property (ADRS's L1 gate reads the reference).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.result import CreditResult
from agentcredit.plugins import (
    BUILTIN_ESTIMATORS,
    ESTIMATORS,
    NameCollision,
    load_group,
    provider,
)

EstimatorFn = Callable[[CreditBatch, Any], CreditResult]
#: what an estimator or auxiliary loss can ask the trainer to prepare.
INPUTS = ("traces", "teacher", "reference", "hindsight")
#: properties an estimator may claim, each checked by the conformance suite
#: (``agentcredit.testing``): ``step_credit`` (every step of a rollout that beat or trailed its
#: group gets a value), ``constant_group_zero`` (a group of equal returns gets 0),
#: ``permutation`` (reordering the rollouts and renaming the groups permutes the output),
#: ``returns_only`` (a rollout's value depends on the group's returns only, not on its rows),
#: ``turn_baseline`` (a per-turn baseline that stays unbiased when the policy decides the number
#: of turns).
CLAIMS = ("step_credit", "constant_group_zero", "permutation", "returns_only",
          "turn_baseline")
#: checks every estimator is held to that one may waive, with the reason, when its design
#: departs from them (``sign``: a random control whose noise can outweigh a return's edge).
WAIVABLE = ("sign",)


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: its name, its function, its config dataclass, its inputs, the
    properties it claims (``CLAIMS``) and the checks it waives (``WAIVABLE``, each with why)."""

    name: str
    fn: EstimatorFn
    config_cls: type
    needs: frozenset[str] = frozenset()
    claims: frozenset[str] = frozenset()
    waives: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)

    def inputs(self, config: Any = None) -> frozenset[str]:
        """What the trainer must prepare for ``config``: ``needs`` plus ``config.extra_inputs``."""
        return self.needs | frozenset(getattr(config, "extra_inputs", ()))

    def __call__(self, batch: CreditBatch, config: Any = None) -> CreditResult:
        """Run the estimator; ``config=None`` uses ``config_cls()`` (the defaults)."""
        if config is None:
            config = self.config_cls()
        elif not isinstance(config, self.config_cls):
            raise TypeError(
                f"estimator {self.name!r} takes a {self.config_cls.__name__}; got "
                f"{type(config).__name__}. Build it with {self.config_cls.__name__}(...)."
            )
        return self.fn(batch, config)


_ESTIMATORS: dict[str, Estimator] = {}
_PROVIDERS: dict[str, str] = {}
"""Who registered each estimator (``plugins.provider``), for a collision's message."""


def register_estimator(name: str, config_cls: type, needs: tuple[str, ...] = (),
                       claims: tuple[str, ...] = (), waives: Mapping[str, str] | None = None
                       ) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator: register ``fn`` under ``name`` with its config dataclass, the inputs
    (``INPUTS``) its batch needs, the properties (``CLAIMS``) the conformance suite holds it
    to and the checks it waives (``WAIVABLE``: check -> why, which ``agentcredit conformance``
    prints); returns ``fn`` unchanged.

    Raises:
        NameCollision: ``name`` is already registered (the line names both providers).
        ValueError: ``name`` is empty or a built-in's name missing from
            ``plugins.BUILTIN_ESTIMATORS``, or ``needs`` names an unknown input,
            ``claims`` an unknown property, or ``waives`` a check that cannot be waived or
            gives no reason.
        TypeError: ``config_cls`` is not a dataclass type.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"estimator name must be a non-empty string; got {name!r}.")
    if not (isinstance(config_cls, type) and dataclasses.is_dataclass(config_cls)):
        raise TypeError(
            f"estimator {name!r}: config_cls must be a dataclass type; got {config_cls!r}. "
            "Declare the estimator's options with @dataclass (an empty one is fine)."
        )

    check_needs(f"estimator {name!r}", needs)
    unknown = sorted(set(claims) - set(CLAIMS))
    if unknown:
        raise ValueError(f"estimator {name!r} claims unknown properties {unknown}; choose "
                         f"from {', '.join(CLAIMS)}")
    waives = dict(waives or {})
    for check, reason in waives.items():
        if check not in WAIVABLE:
            raise ValueError(f"estimator {name!r} waives {check!r}, which no estimator may "
                             f"waive; waivable checks: {', '.join(WAIVABLE)}")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"estimator {name!r} waives {check!r} without a reason; give "
                             f"one: waives={{{check!r}: 'why this method departs from it'}}")

    def decorator(fn: EstimatorFn) -> EstimatorFn:
        by = provider(fn)
        if by.startswith("agentcredit's built-in") and name not in BUILTIN_ESTIMATORS:
            raise ValueError(f"built-in estimator {name!r} is not in plugins.BUILTIN_ESTIMATORS, "
                             "the names agentcredit lists without importing torch; add it there")
        if name in _ESTIMATORS:
            raise NameCollision(
                f"estimator {name!r} is registered twice: first by {_PROVIDERS[name]}, then by "
                f"{by}; rename the second one's estimator (its register_estimator({name!r}, "
                "...) call) and select it with credit.estimator=NEW_NAME")
        _PROVIDERS[name] = by
        _ESTIMATORS[name] = Estimator(name=name, fn=fn, config_cls=config_cls,
                                      needs=frozenset(needs), claims=frozenset(claims),
                                      waives=waives)
        return fn

    return decorator


def check_needs(who: str, needs: tuple[str, ...]) -> None:
    """Raise ``ValueError`` unless ``needs`` are known ``INPUTS`` and ``reference`` comes with
    ``teacher`` (the reference log-probs are token scores, ``TokenScores.ref_logprobs``)."""
    unknown = set(needs) - set(INPUTS)
    if unknown:
        raise ValueError(f"{who} needs unknown inputs {sorted(unknown)}; choose "
                         f"from {', '.join(INPUTS)}")
    if "reference" in needs and "teacher" not in needs:
        raise ValueError(f"{who} needs 'reference' without 'teacher': the reference log-probs "
                         "reach the batch in batch.tokens beside the teacher's; declare "
                         "needs=('teacher', 'reference').")


def get_estimator(name: str) -> Estimator:
    """The estimator registered under ``name`` (plug-ins loaded first); a ``KeyError`` lists
    the known names."""
    load_group(ESTIMATORS)
    try:
        return _ESTIMATORS[name]
    except KeyError:
        raise KeyError(
            f"unknown estimator {name!r}; known estimators: {', '.join(estimator_names())}. "
            "Check the spelling or import the module that registers it."
        ) from None


def estimator_names() -> list[str]:
    """Sorted names of all registered estimators, plug-ins included."""
    load_group(ESTIMATORS)
    return sorted(_ESTIMATORS)
