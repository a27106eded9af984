"""What every benchmark writes besides its figures (``shared/BENCHMARKS.md``)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """CPU model, core count, device and torch version of this run."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "device": "cpu", "torch": torch.__version__}


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_result(name: str, config: dict, metrics: dict, targets: dict, notes: str,
                 quick: bool, **extra) -> Path:
    """Write ``benchmarks/results/NAME.json`` (``NAME.quick.json`` for a smoke run)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / (f"{name}.quick.json" if quick else f"{name}.json")
    payload = {
        "benchmark": name,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_commit": git_commit(),
        "machine": machine(),
        "config": config,
        "metrics": metrics,
        "targets": targets,
        "notes": notes,
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
