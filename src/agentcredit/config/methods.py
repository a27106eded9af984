"""Method names: ``method=NAME`` is short for a group of settings (docs/adrs.md §5.6).

``METHODS`` holds the named baselines and the papers' settings of each method;
every registered estimator name is a method too (``method_settings``).
"""

from __future__ import annotations

from typing import Any

from agentcredit.config.schema import ConfigError, did_you_mean

_NO_SKILLS = {"rollout.skills": False, "eval.skills": False, "optim.aux_loss": "none"}
#: ``method=NAME`` is short for these settings (docs/adrs.md §5.6). Overrides apply in
#: order, so a method replaces the config file's settings and the overrides before it, and the
#: overrides after it replace its own (``method=adrs credit.options.backbone=gigpo
#: credit.options.gate=L3``); a ``method:`` key in a YAML file applies over that file. Every
#: registered estimator name is a method too: ``{"credit.estimator": NAME}`` plus the
#: skill-free settings.
METHODS: dict[str, dict[str, Any]] = {
    # the untrained (SFT) policy with skills in its evaluation prompts: nothing to train
    "skill_prompt": {"credit.estimator": "grpo", **_NO_SKILLS, "eval.skills": True,
                     "run.updates": 0},
    # GRPO with skills in the rollout prompts; evaluated without (`*`: with) them
    "skill_grpo": {"credit.estimator": "grpo", **_NO_SKILLS, "rollout.skills": True},
    "skill_grpo_star": {"credit.estimator": "grpo", **_NO_SKILLS, "rollout.skills": True,
                        "eval.skills": True},
    # the untrained (SFT) policy evaluated without skills: the paper's Vanilla row
    "vanilla": {"credit.estimator": "grpo", **_NO_SKILLS, "run.updates": 0},
    # GRPO plus an auxiliary self-distillation loss toward the privileged teacher (docs/adrs.md
    # §5.6); the weights are the ADRS authors' (OPSD and SDAR 0.01, Skill-SD 0.1)
    "opsd": {"credit.estimator": "grpo", **_NO_SKILLS, "optim.aux_loss": "opsd",
             "optim.aux_coef": 0.01},
    "sdar": {"credit.estimator": "grpo", **_NO_SKILLS, "optim.aux_loss": "sdar",
             "optim.aux_coef": 0.01},
    "skill_sd": {"credit.estimator": "grpo", **_NO_SKILLS, "optim.aux_loss": "skill_sd",
                 "optim.aux_coef": 0.1},
    # OPSD alone: the distillation loss with the policy-gradient term off
    "opsd_only": {"credit.estimator": "grpo", **_NO_SKILLS, "optim.aux_loss": "opsd",
                  "optim.aux_coef": 0.01, "optim.pg_coef": 0.0},
    # RLSD: GRPO's advantage reweighted per token by the teacher (λ 0.5, ε_w 0.2)
    "rlsd": {"credit.estimator": "rlsd", **_NO_SKILLS},
    # ADRS with the ADRS paper's primary settings (docs/adrs.md §5.4, docs/settings.md §6); the
    # shared ones (group size 8, γ 0.95, KL 0.01, lr 1e-6) are the dataclass defaults.
    # ALFWorld: GRPO backbone, L2 gate with GateNorm, global scope, η 0.1, ε_hi 0.28
    "adrs": {"credit.estimator": "adrs", **_NO_SKILLS, "optim.clip_high": 0.28,
             "credit.options.eta": 0.1, "credit.options.scope": "global",
             "credit.options.gate": "L2", "credit.options.gate_norm": True},
    # WebShop: GRPO backbone, L2 gate, per-step scope (the authors' per_seq), η 0.02, ε_hi 0.28
    "adrs_webshop": {"credit.estimator": "adrs", **_NO_SKILLS, "optim.clip_high": 0.28,
                     "credit.options.eta": 0.02, "credit.options.scope": "per_step",
                     "credit.options.gate": "L2", "credit.options.gate_norm": False},
    # DAPO (train/batch_source.py): GRPO with clip-higher (0.2 / 0.28), the token-level loss every
    # method uses, the soft overlong penalty (buffer 20% of max_new_tokens) and dynamic sampling
    "dapo": {"credit.estimator": "grpo", **_NO_SKILLS, "optim.clip_low": 0.2,
             "optim.clip_high": 0.28, "rollout.overlong_buffer": 0.2,
             "rollout.overlong_penalty": 0.1, "rollout.dynamic_sampling_rounds": 3},
}
#: Spellings from the papers that are awkward on a command line.
METHOD_ALIASES = {"skill_grpo*": "skill_grpo_star"}


def method_settings(method: str) -> dict[str, Any]:
    """The dotted settings ``method=NAME`` stands for (``METHODS`` or a registered estimator)."""
    from agentcredit.credit import estimator_names

    if not isinstance(method, str):
        raise ConfigError(f"method = {method!r} must be a method name such as adrs or skill_grpo")
    name = METHOD_ALIASES.get(method, method)
    if name in METHODS:
        return dict(METHODS[name])
    if name in estimator_names():
        return {"credit.estimator": name, **_NO_SKILLS}
    known = list(dict.fromkeys([*METHODS, *METHOD_ALIASES, *estimator_names()]))
    raise ConfigError(f"method = {method!r} is not a method name{did_you_mean(method, known)} "
                      f"(known: {', '.join(known)})")
