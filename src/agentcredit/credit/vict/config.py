"""Options of VICT and its ablations (SPEC 4, defaults of SPEC 6 and the VICT paper's Table 11)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

BACKBONES = ("grpo", "rloo", "gigpo")
LAMBDA_BASE_STEPS = ("all", "nonzero")


@dataclass(frozen=True)
class VICTConfig:
    """VICT: verifier-instrumented credit tracing (the VICT paper, SPEC section 4).

    Backbone:
        backbone: the base estimator whose advantage VICT corrects: ``grpo``,
            ``rloo`` or ``gigpo`` (GiGPO in the paper's compatibility mode: its
            step-level advantage is ``A^base_{i,t}``; the direction ``q_i`` comes
            from its episode level).
        backbone_config: the backbone's own config (``GRPOConfig`` …); ``None``
            uses its defaults.

    Core attribution (SPEC 4.4):
        budget: ``B`` ≥ 1, greedy additions before abstaining with reason ``budget`` (8).
        eps_q: ``ε_q`` ≥ 0, tie margin on ``|A^base_i|``; within it a rollout
            abstains with reason ``tie`` (1e-6).

    Conformance (SPEC 4.2):
        conformance_tolerance: ``η_x`` ≥ 0; a task whose rollouts or mutants
            disagree by more (``max |F − V| > η_x``) is non-conforming (0: exact verifiers).

    Correction (SPEC 4.6):
        gamma_lambda: ``γ_λ`` ≥ 0, scale of the correction against the base advantage (0.5).
        eps: ``ε`` > 0 in the normalisation and in ``λ``'s denominator (1e-6).
        clip_quantile: the quantile of ``|A^base|`` used as the clip ``c`` (0.95).
        lambda_base_steps: the steps over which ``median|A^base|`` in ``λ`` is
            taken: ``all`` (SPEC: every step of the batch) or ``nonzero`` (steps
            with a non-zero base advantage; keeps ``λ > 0`` when most groups have
            equal rewards, which makes the SPEC median 0).

    Controls (SPEC 4.8):
        seed: seed of the ``random_edges`` placebo's permutations.
    """

    backbone: Literal["grpo", "rloo", "gigpo"] = "grpo"
    backbone_config: Any = None
    budget: int = 8
    eps_q: float = 1e-6
    conformance_tolerance: float = 0.0
    gamma_lambda: float = 0.5
    eps: float = 1e-6
    clip_quantile: float = 0.95
    lambda_base_steps: Literal["all", "nonzero"] = "all"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.backbone not in BACKBONES:
            raise ValueError(f"VICTConfig.backbone = {self.backbone!r}; choose one of {BACKBONES}.")
        if not isinstance(self.budget, int) or self.budget < 1:
            raise ValueError(f"VICTConfig.budget = {self.budget!r}; it must be an integer ≥ 1 "
                             "(SPEC default 8).")
        for name, low in (("eps_q", 0.0), ("conformance_tolerance", 0.0), ("gamma_lambda", 0.0)):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= low):
                raise ValueError(f"VICTConfig.{name} = {value}; it must be a finite number "
                                 f"≥ {low}.")
        if not (math.isfinite(self.eps) and self.eps > 0):
            raise ValueError(f"VICTConfig.eps = {self.eps}; it must be > 0 (SPEC default 1e-6).")
        if not 0.0 <= self.clip_quantile <= 1.0:
            raise ValueError(f"VICTConfig.clip_quantile = {self.clip_quantile}; it must lie in "
                             "[0, 1] (SPEC default 0.95).")
        if self.lambda_base_steps not in LAMBDA_BASE_STEPS:
            raise ValueError(f"VICTConfig.lambda_base_steps = {self.lambda_base_steps!r}; choose "
                             f"one of {LAMBDA_BASE_STEPS}.")
        if self.backbone_config is not None:
            from agentcredit.credit.registry import get_estimator

            expected = get_estimator(self.backbone).config_cls
            if not isinstance(self.backbone_config, expected):
                raise TypeError(f"VICTConfig.backbone_config is a "
                                f"{type(self.backbone_config).__name__}; backbone "
                                f"{self.backbone!r} takes a {expected.__name__}.")
