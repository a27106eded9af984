"""Credit assignment: a registry of pure advantage estimators over a ``CreditBatch``.

Importing this package registers the backbones ``grpo``, ``rloo`` and ``gigpo``,
and VICT (``vict``) with its docs/vict.md §4.8 controls (``agentcredit.credit.vict``),
ADRS (``adrs``, docs/adrs.md §5), the self-distillation baseline ``rlsd`` (§5.6) and
the VICT paper's fine-grained baselines ``salt``, ``hcapo`` and ``proxmo``.
"""

from agentcredit.credit import (  # noqa: F401  (importing registers the estimators)
    adrs,
    gigpo,
    grpo,
    hcapo,
    proxmo,
    rloo,
    salt,
    self_distillation,
    vict,
)
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.registry import estimator_names, get_estimator, register_estimator
from agentcredit.credit.result import CreditResult
from agentcredit.credit.tokens import TokenScores

__all__ = [
    "CreditBatch",
    "CreditResult",
    "TokenScores",
    "estimator_names",
    "get_estimator",
    "register_estimator",
]
