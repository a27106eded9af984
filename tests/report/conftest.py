"""Copies of the session's real tiny runs (``report_runs``, ``tests/conftest.py``) for the
report tests, made hostile or damaged.

``hostile_run`` copies the VICT run under a name that is HTML, and writes HTML and bytes that
are not UTF-8 into its saved observations, actions and metrics.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from agentcredit.run.saved_rollouts import saved_updates

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
#: a run directory name that is HTML (``/`` cannot be in a name)
HOSTILE_NAME = IMG + "_seed0"


@pytest.fixture
def runs_copy(report_runs, tmp_path) -> Path:
    """A copy of the session's runs that a test may change."""
    copy = tmp_path / "runs"
    shutil.copytree(report_runs, copy, ignore=shutil.ignore_patterns("checkpoints", "reference",
                                                                     "init_model", ".lock"))
    return copy


@pytest.fixture
def hostile_run(runs_copy) -> Path:
    """The runs, plus a copy of the VICT run named ``HOSTILE_NAME`` whose newest saved update
    has ``SCRIPT`` as step 0's observation, ``IMG`` as its response, a lone surrogate (an
    undecodable byte) in step 1's observation and raw ``0xFF`` bytes in step 1's response,
    and whose ``metrics.jsonl`` has a line with raw ``0xFF`` bytes."""
    hostile = runs_copy / HOSTILE_NAME
    shutil.copytree(runs_copy / "vict_seed0", hostile)
    _, newest = saved_updates(hostile / "rollouts")[-1]
    record = json.loads(gzip.decompress(newest.read_bytes()))
    first = record["rollouts"][0]["steps"]
    first[0]["observation"], first[0]["response"] = SCRIPT, IMG
    first[1]["observation"] = "before \udcff after"
    first[1]["response"] = "RAW_BYTES"
    data = json.dumps(record).encode().replace(b"RAW_BYTES", b"raw \xff\xfe bytes")
    newest.write_bytes(gzip.compress(data))
    with open(hostile / "metrics.jsonl", "ab") as log:
        log.write(b'{"kind": "note", "update": 3, "text": "\xff\xfe"}\n')
    return runs_copy
