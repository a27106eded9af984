import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentcredit.credit.vict.ledger import LEDGER_FIELDS
from agentcredit.jsonl_log import (
    JsonlLog,
    count_lines,
    finite_or_null,
    read_jsonl,
    repair_torn_tail,
    truncate_lines,
)

LOG_MODULE = Path(__file__).parents[1] / "src" / "agentcredit" / "jsonl_log.py"


def _row(k):
    return {"rollout": k, "step": 0, "atom_id": "object_held", "correction": 0.5 * k}


def test_rows_are_appended_as_whole_json_lines_with_common_fields(tmp_path):
    path = tmp_path / "run" / "ledger.jsonl"
    with JsonlLog(path) as ledger:
        assert ledger.append([_row(0), _row(1)], update=3) == 2
        assert ledger.append([]) == 0
    with JsonlLog(path) as ledger:
        ledger.append([_row(2)], update=4)
    rows = list(read_jsonl(path))
    assert [r["rollout"] for r in rows] == [0, 1, 2] and [r["update"] for r in rows] == [3, 3, 4]
    assert path.read_bytes().endswith(b"\n")


def test_opening_a_ledger_truncates_a_torn_last_line_left_by_a_crash(tmp_path):
    path = tmp_path / "ledger.jsonl"
    path.write_text(json.dumps(_row(0)) + "\n" + '{"rollout": 1, "ste')
    assert [r["rollout"] for r in read_jsonl(path)] == [0]  # readers skip it too
    with JsonlLog(path) as ledger:
        ledger.append([_row(2)])
    assert [r["rollout"] for r in read_jsonl(path)] == [0, 2]
    assert repair_torn_tail(path) == 0


def test_a_row_that_is_not_finite_json_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "ledger.jsonl"
    with JsonlLog(path) as ledger, pytest.raises(ValueError):
        ledger.append([_row(0), {"correction": float("nan")}])
    assert path.read_bytes() == b""


_WRITER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("jsonl_log", sys.argv[1])
log = importlib.util.module_from_spec(spec)
spec.loader.exec_module(log)
writer = log.JsonlLog(sys.argv[2])
print("ready", flush=True)
k = 0
while True:
    writer.append([{"rollout": k, "step": j, "evidence_source": "x" * 3000} for j in range(50)])
    k += 1
"""


def test_a_writer_killed_mid_append_never_leaves_a_torn_line_after_reopening(tmp_path):
    path = tmp_path / "ledger.jsonl"
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(LOG_MODULE), str(path)],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == b"ready"
        deadline = time.monotonic() + 10
        while (not path.exists() or path.stat().st_size < 2_000_000) \
                and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    JsonlLog(path).close()
    text = path.read_bytes()
    assert text and text.endswith(b"\n")
    rows = [json.loads(line) for line in text.splitlines()]
    assert len(rows) > 50


def test_ledger_rows_carry_the_spec_fields():
    assert {"task_id", "rollout", "step", "action", "atom_id", "relation", "evidence_source",
            "delta_hat", "witness_weight", "correction"} <= set(LEDGER_FIELDS)


def test_truncate_lines_rolls_a_log_back_to_a_recorded_length(tmp_path):
    path = tmp_path / "metrics.jsonl"
    with JsonlLog(path) as log:
        log.append([_row(k) for k in range(5)])
    assert count_lines(path) == 5
    truncate_lines(path, 3)
    assert [r["rollout"] for r in read_jsonl(path)] == [0, 1, 2]


def test_a_damaged_line_before_the_last_is_an_error_not_skipped(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(ValueError, match="metrics.jsonl:2 is not a JSON record"):
        list(read_jsonl(path))


def test_metrics_nan_becomes_null_with_a_flag():
    assert finite_or_null({"a": float("nan"), "b": 1.0, "c": float("inf")}) == {
        "a": None, "b": 1.0, "c": None, "nonfinite": ["a", "c"]}
