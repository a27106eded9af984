"""Run the real ``agentcredit`` CLI in a child process with the fake environment registered."""

from __future__ import annotations

import sys
from pathlib import Path

# the tests folder as the package ``tests`` (what pytest's importlib mode makes of it), so
# conftest's relative imports resolve and no installed ``tests`` package can shadow it; and
# Ctrl-C given back: a test run started in the background of a shell (``make test &``,
# ``nohup``) hands its children SIGINT ignored, and Python then never raises
# KeyboardInterrupt (as a user's ``nohup agentcredit train`` rightly wants)
CHILD = """
import signal, sys, types
signal.signal(signal.SIGINT, signal.default_int_handler)
package = types.ModuleType("tests")
package.__path__ = [sys.argv[1]]
sys.modules["tests"] = package
from tests.conftest import FakeSuite
from agentcredit.envs.suites import register_environment
from agentcredit.cli import main
register_environment("fake", FakeSuite)
raise SystemExit(main(sys.argv[2:]))
"""
TESTS = str(Path(__file__).resolve().parents[1])


def cli_command(*args: str) -> list[str]:
    """The argv of ``agentcredit ARGS...`` in a child interpreter that knows the fake env."""
    return [sys.executable, "-c", CHILD, TESTS, *args]
