"""ADRS's options (docs/adrs.md §5): ``ADRSConfig`` and the thresholds of the gate and
the token path."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from agentcredit.config.schema import validate
from agentcredit.credit.gigpo import (
    GiGPOConfig,
)
from agentcredit.credit.grpo import (
    GRPOConfig,
)

# GateNorm divides by the contrast scale only above this (docs/adrs.md §5.3).
GATE_NORM_MIN_SCALE = 1e-8
# A group whose return std (GRPO) or every advantage (GiGPO) is below this carries no return
# signal, and the token path skips it under token_path_zero_signal=skip (docs/adrs.md §5.4).
ZERO_SIGNAL_THRESHOLD = 1e-6




@dataclass(frozen=True)
class ADRSConfig:
    """Options of ADRS (Zhang et al. 2026, docs/adrs.md §5); defaults are the paper's ALFWorld
    settings.

    Attributes:
        backbone: the native advantage ADRS shapes, with its own options: a
            ``GRPOConfig`` (``norm_by_std=false`` = Dr.GRPO) or a ``GiGPOConfig`` (in YAML
            and on the command line ``backbone.name=gigpo backbone.mode=mean_norm``).
        gate: ``L2`` (rollouts of a prompt group, the GRPO-level TVA), ``L3``
            (steps sharing a GiGPO anchor state), ``L1`` (return-free token
            fallback, needs reference log-probs) or ``off`` (``m = 1``).
        eta: ``η`` in [0, 10], the teacher scale (papers: 0.1 ALFWorld, 0.02 WebShop,
            0.05 Search). ``0`` reproduces the backbone exactly.
        scope: the tokens ``σ_q`` is taken over (docs/adrs.md §5.2): ``global`` (every
            valid token of the batch; the paper's ALFWorld and Search runs), ``per_step``
            (the step's own tokens; the authors' ``per_seq``, their WebShop run) or
            ``per_rollout`` (every token of the step's rollout).
        gate_norm: GateNorm, divide the contrasts by their (uncentred-sign)
            std over the batch's units when that std exceeds 1e-8 (docs/adrs.md §5.3).
        temperature: ``T`` in (0, 1000] of the soft confidence weight α (papers: 1.0).
        tau: ``τ`` in (0, 1000], the gate's slope (papers: 2.0).
        eps: ``ε`` in (0, 1] of the calibration, the TVA contrast and the whitening
            (papers: 1e-8).
        gamma: ``γ`` of the L3 gate's return-to-go (papers: 0.95; a GiGPO backbone's
            step level uses its own ``backbone.gamma``).
        z_clip: clip the token path ``η·Z^T`` to ``±z_clip`` (the authors' ``wn_clip``,
            0.2 in their scripts; at most 100); ``None`` = no clip (the paper's equations,
            the default).
        z_clip_adaptive: shrink each group's bound to ``z_clip · min(s_g / median s, 1)``,
            ``s_g`` = the group's largest ``|A^traj|`` (the authors' ``wn_adaptive_clip``);
            needs ``z_clip``.
        token_path_zero_signal: ``skip`` leaves ``η·Z^T`` out of groups without return
            signal (return std, or under GiGPO every advantage, below 1e-6; or one rollout),
            as the authors' code does (the default); ``apply`` adds it everywhere, the
            literal reading of the paper's Eq. 10 (docs/adrs.md §5.4).
        token_path_warmup: the token path ``η·Z^T`` stays off for the first
            ``token_path_warmup`` updates (authors' code: 20; default 0; at most a million,
            as ``run.updates``).
        token_path_updates: then stays on for this many updates and switches
            off again (authors' code: 50; at most a million); ``None`` = on for good
            (default).
        paths: which of ADRS's two ways into the advantage run (docs/adrs.md §5.4, the
            paper's path ablation): ``both`` (default); ``token``, the token path ``η·Z^T`` on
            the backbone's advantage of the base rewards; ``reward``, the backbone on the
            shaped rewards with no token path (with a step-shared gate this is the backbone
            itself, since each step's ``r^T`` sums to 0).
    """

    _limits: ClassVar[dict[str, tuple]] = {
        "eta": (0.0, 10.0), "temperature": (0.0, 1000.0, "open"),
        "tau": (0.0, 1000.0, "open"), "eps": (0.0, 1.0, "open"), "gamma": (0.0, 1.0),
        "z_clip": (0.0, 100.0, "open"), "token_path_warmup": (0, 1_000_000),
        "token_path_updates": (1, 1_000_000)}

    backbone: GRPOConfig | GiGPOConfig = field(default_factory=GRPOConfig)
    gate: Literal["off", "L1", "L2", "L3"] = "L2"
    eta: float = 0.1
    scope: Literal["global", "per_step", "per_rollout"] = "global"
    gate_norm: bool = False
    temperature: float = 1.0
    tau: float = 2.0
    eps: float = 1e-8
    gamma: float = 0.95
    z_clip: float | None = None
    z_clip_adaptive: bool = False
    token_path_zero_signal: Literal["skip", "apply"] = "skip"
    token_path_warmup: int = 0
    token_path_updates: int | None = None
    paths: Literal["both", "token", "reward"] = "both"

    def __post_init__(self) -> None:
        if self.scope == "per_seq":
            raise ValueError("ADRSConfig.scope = 'per_seq' is ambiguous and no longer accepted: "
                             "choose per_step (σ_q over the step's tokens, the ADRS authors' "
                             "per_seq) or per_rollout (over the rollout's tokens, the old "
                             "per_seq here)")
        validate(self)
        if self.z_clip_adaptive and self.z_clip is None:
            raise ValueError("ADRSConfig.z_clip_adaptive = True scales the bound z_clip, which "
                             "is None; set z_clip (the authors use 0.2) or z_clip_adaptive=false")

    @property
    def extra_inputs(self) -> tuple[str, ...]:
        """The L1 gate compares ``ℓ^T`` with the reference policy, so it needs its log-probs."""
        return ("reference",) if self.gate == "L1" else ()

    @property
    def has_window(self) -> bool:
        """Whether the token path is limited to a window of updates."""
        return self.token_path_warmup > 0 or self.token_path_updates is not None

    def token_path_active(self, update: int | None) -> bool:
        """Whether ``η·Z^T`` is applied at the 1-based ``update`` (always, without a window)."""
        if not self.has_window:
            return True
        if update is None:
            raise ValueError("ADRSConfig limits the token path to a window of updates "
                             f"(token_path_warmup={self.token_path_warmup}, token_path_updates="
                             f"{self.token_path_updates}) but the batch carries no update index; "
                             "pass TokenScores(update=...) with the 1-based update number.")
        end = math.inf if self.token_path_updates is None else \
            self.token_path_warmup + self.token_path_updates
        return self.token_path_warmup < update <= end
