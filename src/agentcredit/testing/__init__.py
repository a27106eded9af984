"""Checks for code that plugs into agentcredit, usable from pytest: the conformance suite for
any advantage estimator (``conformance.py``) over generated batches (``cases.py``).

    from agentcredit.testing import assert_conforms
    def test_my_estimator_conforms():
        assert_conforms("my_estimator")
"""

from agentcredit.testing.conformance import (
    ConformanceReport,
    Failure,
    assert_conforms,
    check_estimator,
    turn_gradients,
)

__all__ = ["ConformanceReport", "Failure", "assert_conforms", "check_estimator",
           "turn_gradients"]
