"""What the report reads is bounded in size, depth and number length; a bad line or file is
skipped with a warning naming it and never fails the page (report/run_files.py)."""

from __future__ import annotations

import gzip
import json
import os
import time

import pytest

from agentcredit.config.bounded_yaml import YAML_NODES
from agentcredit.report.run_files import clean_json, read_records, read_run
from agentcredit.run.saved_rollouts import READ_LIMIT, read_saved_rollouts

GOOD = {"kind": "update", "update": 1, "train/success": 0.5}


def _run(tmp_path, metrics: str, config: str = "run: {updates: 1}\n"):
    run = tmp_path / "run_seed0"
    run.mkdir()
    (run / "config.yaml").write_text(config)
    (run / "metrics.jsonl").write_text(metrics)
    return run


@pytest.mark.parametrize("bad", ["[" * 100_000 + "]" * 100_000,
                                 '{"kind": "update", "update": ' + "9" * 50_000 + "}",
                                 '{"kind": "update", "update": 2, "x": NaN}'])
def test_a_deep_or_huge_number_line_is_skipped_and_named(tmp_path, bad):
    run = read_run(_run(tmp_path, f"{json.dumps(GOOD)}\n{bad}\n"))
    assert run.updates == [GOOD]
    assert any(p.startswith("metrics.jsonl: line 2 skipped") for p in run.problems), run.problems


def test_an_entity_expansion_config_is_refused_at_once(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join(f'*a{i - 1}' for _ in range(10))}]" for i in range(1, 9)]
    began = time.perf_counter()
    run = read_run(_run(tmp_path, f"{json.dumps(GOOD)}\n", "\n".join(lines) + "\n"))
    assert time.perf_counter() - began < 5  # 10^9 values if expanded: refused long before
    assert run.config == {} and run.updates == [GOOD]
    assert any(f"holds more than {YAML_NODES:,} values" in p for p in run.problems)


def test_clean_json_replaces_every_lone_surrogate_in_keys_and_values():
    # what a config.yaml parsed without libyaml can hold ("\\udcff" is an escape there)
    value = {"a\udcff": [1, {"b": "x\udcffy"}], "c": None}
    assert clean_json(value) == {"a\ufffd": [1, {"b": "x\ufffdy"}], "c": None}


def test_a_metrics_file_that_is_a_fifo_or_a_link_is_skipped_by_name(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("run: {updates: 1}\n")
    os.mkfifo(run / "ledger.jsonl")
    (tmp_path / "outside.jsonl").write_text(json.dumps(GOOD) + "\n")
    (run / "metrics.jsonl").symlink_to(tmp_path / "outside.jsonl")
    records, problems = read_records(run / "metrics.jsonl")
    assert records == [] and "is a symlink" in problems[0]
    records, problems = read_records(run / "ledger.jsonl")
    assert records == [] and "is a FIFO" in problems[0]


def test_a_saved_update_that_expands_past_the_bound_is_refused(tmp_path):
    path = tmp_path / "update_00001.json.gz"
    with gzip.open(path, "wb", compresslevel=1) as handle:
        handle.write(b'{"format": 1, "pad": "')
        chunk = b"0" * (1 << 20)
        for _ in range((READ_LIMIT >> 20) + 1):
            handle.write(chunk)
        handle.write(b'"}')
    assert path.stat().st_size < READ_LIMIT // 100  # a small file on disk
    with pytest.raises(ValueError, match="expands to more than 256 MiB"):
        read_saved_rollouts(path)
