"""Which passes each update makes over its rollouts besides sampling, decided once per run.

``scoring_passes(config)`` names them from ``PASSES``, each for one reason:

    behaviour   ``ℓ^b`` scored again under the pre-update policy, for PPO's ratio
                (``optim.recompute_old_logprobs``; without it the log-probs recorded at
                sampling serve, the same numbers)
    reference   ``ℓ_ref`` under the frozen reference: the KL term (``optim.kl_coef > 0``) or
                an estimator that reads it (ADRS with ``gate=L1``)
    teacher     ``ℓ^T`` with the skill in the prompt (``scoring/teacher.py``): ADRS, RLSD,
                the auxiliary losses ``opsd``, ``sdar``, ``skill_sd``
    hindsight   ``ℓ^H`` with the final observation in the prompt (``scoring/hindsight_pass.py``):
                HCAPO
    traces      the verifier traces (``scoring/verifier_traces.py``): VICT and its controls

Beyond ``behaviour`` and the KL's ``reference``, a pass runs exactly when the estimator or
the auxiliary loss declared it (``TrainConfig.inputs``, docs/design.md, "Registries"), so the
trainer never asks which method it runs.
"""

from __future__ import annotations

from agentcredit.config import TrainConfig

#: every pass an update can make, in the order it makes them
PASSES = ("behaviour", "reference", "teacher", "hindsight", "traces")


def scoring_passes(config: TrainConfig) -> frozenset[str]:
    """The passes each update of ``config`` makes, from ``PASSES`` (see the module docstring
    for why each runs)."""
    passes = set(config.inputs)
    if config.optim.recompute_old_logprobs:
        passes.add("behaviour")
    if config.optim.kl_coef > 0:
        passes.add("reference")
    return frozenset(passes)
