"""agentcredit: RL for multi-turn LLM agents with verifier-traced (VICT) and self-distilled
(ADRS) credit assignment.

For a trainer of your own, the credit layer is the public API: build a ``CreditBatch`` from
your rollouts, look an estimator up by name and call it with its config::

    from agentcredit import CreditBatch, GiGPOConfig, get_estimator

    batch = CreditBatch.from_lists([[0.0, 1.0], [0.0, 0.0]], group_ids=[0, 0])
    result = get_estimator("gigpo")(batch, GiGPOConfig())  # result.step_advantages [S]

The names below load on first use, so ``import agentcredit.<module>`` stays light (the
config needs no torch).
"""

from __future__ import annotations

import importlib

#: public name -> the module that defines it
_EXPORTS = {
    "CreditBatch": "agentcredit.credit.batch",
    "CreditResult": "agentcredit.credit.result",
    "TokenScores": "agentcredit.credit.tokens",
    "HindsightScores": "agentcredit.credit.hindsight",
    "estimator_names": "agentcredit.credit",
    "get_estimator": "agentcredit.credit",
    "register_estimator": "agentcredit.credit",
    "GRPOConfig": "agentcredit.credit.grpo",
    "RLOOConfig": "agentcredit.credit.rloo",
    "GiGPOConfig": "agentcredit.credit.gigpo",
    "VICTConfig": "agentcredit.credit.vict.config",
    "ADRSConfig": "agentcredit.credit.adrs",
    "RLSDConfig": "agentcredit.credit.self_distillation",
    "SALTConfig": "agentcredit.credit.salt",
    "HCAPOConfig": "agentcredit.credit.hcapo",
    "ProxMOConfig": "agentcredit.credit.proxmo",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentcredit' has no attribute {name!r}")
    # through agentcredit.credit, so every estimator is registered before the first lookup
    importlib.import_module("agentcredit.credit")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)
