"""Credit assignment: a registry of pure advantage estimators over a ``CreditBatch``.

Importing this package registers the backbones ``grpo``, ``rloo`` and ``gigpo``,
and VICT (``vict``) with its docs/vict.md §4.8 controls (``agentcredit.credit.vict``),
and ADRS (``adrs``, docs/adrs.md §5).
"""

from agentcredit.credit import (  # noqa: F401  (importing registers the estimators)
    adrs,
    gigpo,
    grpo,
    rloo,
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
