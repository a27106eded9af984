"""Options of VICT and its controls (docs/vict.md §4, defaults of docs/settings.md §6 and the VICT
paper's Table 11)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from agentcredit.config.schema import SEED_MAX, validate
from agentcredit.credit.gigpo import GiGPOConfig
from agentcredit.credit.grpo import GRPOConfig
from agentcredit.credit.hcapo import HCAPOConfig
from agentcredit.credit.proxmo import ProxMOConfig
from agentcredit.credit.registry import get_estimator
from agentcredit.credit.rloo import RLOOConfig
from agentcredit.credit.salt import SALTConfig


@dataclass(frozen=True)
class VICTConfig:
    """VICT: verifier-instrumented credit tracing (the VICT paper, docs/vict.md §4).

    Backbone:
        backbone: the base estimator whose advantage VICT corrects, with its own
            options: a ``GRPOConfig``, ``RLOOConfig``, ``GiGPOConfig``, ``SALTConfig``,
            ``HCAPOConfig`` or ``ProxMOConfig`` (in YAML and on the command line
            ``backbone.name=gigpo backbone.mode=mean_norm``; a bare name ``backbone=gigpo``
            takes that backbone's defaults). A step-level backbone (GiGPO, SALT, HCAPO,
            ProxMO) runs in the paper's compatibility mode: its step advantage is
            ``A^base_{i,t}``; the direction ``q_i`` comes from its episode level. The
            backbone's inputs (HCAPO's hindsight pass) are prepared too.

    Core attribution (docs/vict.md §4.4):
        budget: ``B`` in [1, 1000], greedy additions before abstaining with reason
            ``budget`` (8).
        eps_q: ``ε_q`` in [0, 1000], tie margin on ``|A^base_i|``; within it a rollout
            abstains with reason ``tie`` (1e-6).

    Atom marginals (docs/vict.md §4.5; the paper names the "atom marginal" it normalises but
    never defines it, so the other defensible readings are options):
        marginal: the raw value ``δ_{i,j}`` that is normalised: ``status`` (the signed atom
            status, ``+w`` SAT, ``−w`` VIOL, else 0: the paper-literal reading and the
            default) or ``counterfactual`` (``F(z̄_i) − F(z̄_i with atom j UNSAT)``: what the
            atom's final status is worth to the verifier's score given the rest of the
            rollout; an atom without a score role is worth 0).
        centre: ``mean`` (the group mean and population std, the default) or ``median``
            (the paper's literal median and 1.4826·MAD). With binary atom statuses the median
            puts every rollout on its group's majority side at ``δ̂ = 0``, so the correction
            could only repeat the sign of the rollout's own base advantage; the mean gives
            every rollout that differs from the group's average a signed marginal
            (docs/vict.md §4.5).

    Conformance (docs/vict.md §4.2):
        conformance_tolerance: ``η_x`` in [0, 1000]; a task whose rollouts or mutants
            disagree by more (``max |F − V| > η_x``) is non-conforming (0: exact verifiers).

    Correction (docs/vict.md §4.6):
        gamma_lambda: ``γ_λ`` in [0, 100], scale of the correction against the base
            advantage (0.5).
        eps: ``ε`` in (0, 1] in the normalisation and in ``λ``'s denominator (1e-6).
        clip_quantile: the quantile of ``|A^base|`` used as the clip ``c`` (0.95).
        lambda_base_steps: the steps over which ``median|A^base|`` in ``λ`` and the clip
            quantile ``c`` are taken: ``signal`` (default: steps of groups with some
            non-zero ``A^base``, so equal-reward groups cannot switch VICT off), ``all``
            (the papers' literal reading: every step of the batch; ``λ = 0`` once half the
            batch's steps have ``A^base = 0``) or ``nonzero`` (steps whose own
            ``A^base ≠ 0``).

    Controls (docs/vict.md §4.8):
        seed: seed of the ``random_edges`` placebo's draws (mixed with each group's id).
    """

    _limits: ClassVar[dict[str, tuple]] = {
        "budget": (1, 1000), "eps_q": (0.0, 1000.0), "conformance_tolerance": (0.0, 1000.0),
        "gamma_lambda": (0.0, 100.0), "eps": (0.0, 1.0, "open"), "clip_quantile": (0.0, 1.0),
        "seed": (0, SEED_MAX)}

    backbone: (GRPOConfig | RLOOConfig | GiGPOConfig | SALTConfig | HCAPOConfig
               | ProxMOConfig) = field(default_factory=GRPOConfig)
    budget: int = 8
    eps_q: float = 1e-6
    conformance_tolerance: float = 0.0
    gamma_lambda: float = 0.5
    eps: float = 1e-6
    clip_quantile: float = 0.95
    lambda_base_steps: Literal["signal", "all", "nonzero"] = "signal"
    marginal: Literal["status", "counterfactual"] = "status"
    centre: Literal["mean", "median"] = "mean"
    seed: int = 0

    def __post_init__(self) -> None:
        validate(self)

    @property
    def extra_inputs(self) -> frozenset[str]:
        """What the backbone reads besides the traces (HCAPO: its hindsight scores)."""
        return get_estimator(self.backbone.config_name).inputs(self.backbone)
