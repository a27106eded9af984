"""The benchmark scripts import each other as top-level modules (``from bench_common import
...``), as they do when run from the repository root: put ``benchmarks/`` on the path."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
