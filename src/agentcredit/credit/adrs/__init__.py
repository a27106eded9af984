"""ADRS: self-distilled reward shaping (docs/adrs.md §5.2–5.5) as a credit estimator.

Zhang et al. 2026, "Agentic Reinforcement Learning with Self-Distilled Reward
Shaping". The frozen behaviour snapshot rescores the sampled tokens with a
task-matched skill in its context (``ℓ^T``, computed by ``train/scoring/teacher.py``);
this module turns those scores into token-level credit inside the backbone's
own advantage, in three modules:

1. **Within-step calibration** (docs/adrs.md §5.2): ``q̂ = (ℓ^T − b_s) / (σ_q + ε)``,
   centred on the step's mean and scaled by a std over the ``global``, ``per_step`` or
   ``per_rollout`` scope. Each step's ``q̂`` sums to zero.
2. **TVA gate** (docs/adrs.md §5.3): a detached gate ``m`` in (0, 1) from the
   within-group association between unit confidence and pre-ADRS return:
   L2 units are rollouts of a prompt group (return ``R_i``), L3 units are steps
   sharing a GiGPO anchor state (return-to-go ``G``); L1 is the return-free
   token fallback ``sigmoid(τ(ℓ^T − ℓ_ref))``; ``off`` is ``m = 1``.
3. **Credit integration** (docs/adrs.md §5.4): ``r^T = η·m·q̂``; the trajectory path
   runs the backbone's native advantage on the shaped reward ``r̃ = r^base + r^T``;
   the token path whitens ``r^T`` over each prompt group's valid tokens into
   ``Z^T``; ``A^ADRS = A^traj + η·Z^T`` per token, where ``η·Z^T`` is left out in
   groups without return signal (``token_path_zero_signal=skip``) and optionally
   clipped (``z_clip``, fixed or adaptive). With GiGPO, the shaped
   reward enters the episode level only and the native step level is kept, so
   ``η·Z^T`` joins the episode-level advantage.

Symbols → variables: ``ℓ^T`` → ``teacher [N]``; ``b_s`` → ``step_mean [S]``;
``q``, ``q̂`` → ``q [N]``, ``q_hat [N]``; ``α_u`` → ``TVAGate.alpha [U]``;
``d_g`` → ``TVAGate.contrast [G]``; ``m`` → ``token_gate [N]``;
``r^T`` → ``teacher_reward [N]``; ``A^traj`` → ``step_adv [S]``;
``Z^T`` → ``z [N]``; ``A^ADRS`` → ``CreditResult.token_advantages [N]``.

Token layout: ``batch.tokens`` (``credit.tokens.TokenScores``), flat ``[N]``
over the valid response tokens; ``token_advantages`` comes back in the same
order (``advantages[loss_mask] = result.token_advantages``).

[choice] Numerical identities used instead of float residue: with a
step-shared gate (off, L2, L3) ``Σ_{j∈V_s} r^T_{s,j} = 0`` exactly (the paper's
Prop. 4.2), so the shaped returns *are* the base returns and the trajectory
path is the backbone's advantage bit for bit; adding the ~1e-9 rounding residue
instead would give groups whose rollouts all scored the same a spurious
non-zero GRPO advantage. With the L1 token gate the step sums are not zero and
are added. The trajectory path uses the backbone's own normalisation
(``(S − μ)/(σ + ε_B)`` for GRPO), which the paper's Algorithm 1 prescribes
("use the backbone's native credit construction on r̃") and which is what
makes ``η = 0`` reproduce the backbone exactly.

Modules, one per section as VICT's: ``config`` (``ADRSConfig``), ``calibration`` (§5.2),
``gates`` (§5.3), ``integration`` (§5.4, the estimator ``adrs``), ``diagnostics`` (§5.5).
Importing this package registers ``adrs``.
"""

from agentcredit.credit.adrs.calibration import calibrate
from agentcredit.credit.adrs.config import ADRSConfig
from agentcredit.credit.adrs.diagnostics import TOKEN_CLASSES, token_class_gap
from agentcredit.credit.adrs.gates import TVAGate, level_gate, token_gate_l1, tva_contrast, tva_gate
from agentcredit.credit.adrs.integration import adrs, whiten_in_groups

__all__ = [
    "TOKEN_CLASSES",
    "ADRSConfig",
    "TVAGate",
    "adrs",
    "calibrate",
    "level_gate",
    "token_class_gap",
    "token_gate_l1",
    "tva_contrast",
    "tva_gate",
    "whiten_in_groups",
]
