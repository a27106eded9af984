"""Real tiny runs for the report tests, and copies of them made hostile or damaged.

``report_runs`` trains, once per session, two seconds-long runs on the fake
corridor (``tests/conftest.py``) that save every update's rollouts: VICT (with
ledger rows: SFT is stopped early enough that groups mix wins and losses) and
ADRS (teacher scores, so token heat-maps). ``hostile_run`` copies the VICT run
under a name that is HTML, and writes HTML and bytes that are not UTF-8 into its
saved observations, actions and metrics.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from agentcredit.config import load_config
from agentcredit.train.loop import train
from agentcredit.train.saved_rollouts import saved_updates

REPORT_RUN = (
    "run.eval_every=1", "run.checkpoint_every=1", "run.save_rollouts=1",
    "sft.epochs=30", "sft.batch_size=4", "sft.lr=0.01",
    "rollout.group_size=4", "rollout.tasks_per_update=2",
    "optim.lr=1e-3", "optim.mini_batches=2", "optim.micro_batch_size=4",
)
SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
#: a run directory name that is HTML (``/`` cannot be in a name)
HOSTILE_NAME = IMG + "_seed0"


@pytest.fixture(scope="session")
def skills_root(tmp_path_factory) -> Path:
    """Skill texts for the fake environment's two task types (ADRS's teacher reads them)."""
    root = tmp_path_factory.mktemp("skills")
    folder = root / "fake"
    folder.mkdir()
    (folder / "guide.md").write_text("Walk the corridor room by room until you see the apple.\n")
    (folder / "type0.md").write_text("Type zero: the apple is often to the right; take it.\n")
    (folder / "type1.md").write_text("Type one: the apple may be to the left; take it.\n")
    return root


@pytest.fixture(scope="session")
def report_runs(tiny_fake_run, skills_root, tmp_path_factory) -> Path:
    """A folder with ``vict_seed0`` (3 updates, the newest 2 saved) and ``adrs_seed0``
    (2 updates, both saved), real runs of the fake corridor."""
    root = tmp_path_factory.mktemp("report_runs")
    runs = {"vict_seed0": ("method=vict", "run.updates=3", "run.keep_rollouts=2"),
            "adrs_seed0": ("method=adrs", "run.updates=2", f"skills.root={skills_root}",
                           "eval.probes=0")}
    for name, extra in runs.items():
        config = load_config(None, [*tiny_fake_run, *REPORT_RUN, f"run.output_dir={root}",
                                    f"run.name={name}", *extra])
        train(config, echo=lambda _: None)
    return root


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
