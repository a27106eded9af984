"""tau2's ``calculate`` tool: an arithmetic expression to its value rounded to 2 decimals.

tau2 evaluates the expression with Python after checking that it holds only
digits, ``+ - * / ( ) .`` and spaces; so do we, so results and error texts
(``division by zero``, ``invalid syntax (<string>, line 1)``) are tau2's. One
departure: ``**`` is refused, because ``9**9**9**9`` would run for ever and a
policy may well write it.
"""

from __future__ import annotations

ALLOWED = "0123456789+-*/(). "
POWER_REFUSED = "Exponentiation (**) is not supported; multiply instead"


def calculate(expression) -> str:
    """The value of ``expression`` as tau2 prints it (``"12.5"``); raises ``ValueError`` (or the
    evaluation's own error) on a bad expression."""
    if not all(char in ALLOWED for char in expression):
        raise ValueError("Invalid characters in expression")
    if "**" in expression:
        raise ValueError(POWER_REFUSED)
    # safe: the characters above spell no name, attribute or call
    return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))
