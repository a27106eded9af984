"""Run the real ``agentcredit`` CLI in a child process with the fake environment registered."""

from __future__ import annotations

import sys
from pathlib import Path

# the tests folder as the package ``tests`` (what pytest's importlib mode makes of it), so
# conftest's relative imports resolve and no installed ``tests`` package can shadow it
CHILD = """
import sys, types
package = types.ModuleType("tests")
package.__path__ = [sys.argv[1]]
sys.modules["tests"] = package
from tests.conftest import FakeSuite
from agentcredit.train.env_suites import register_env_suite
from agentcredit.cli import main
register_env_suite("fake", FakeSuite)
raise SystemExit(main(sys.argv[2:]))
"""
TESTS = str(Path(__file__).resolve().parents[1])


def cli_command(*args: str) -> list[str]:
    """The argv of ``agentcredit ARGS...`` in a child interpreter that knows the fake env."""
    return [sys.executable, "-c", CHILD, TESTS, *args]
