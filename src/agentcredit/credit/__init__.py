"""Credit assignment: a registry of pure advantage estimators over a ``CreditBatch``.

Importing this package registers the backbones ``grpo``, ``rloo`` and ``gigpo``.
"""

from agentcredit.credit import gigpo, grpo, rloo  # noqa: F401  (registers the backbones)
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.registry import estimator_names, get_estimator, register_estimator
from agentcredit.credit.result import CreditResult

__all__ = [
    "CreditBatch",
    "CreditResult",
    "estimator_names",
    "get_estimator",
    "register_estimator",
]
