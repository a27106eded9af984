"""Write verl's train/val parquet files for an agentcredit config: one row per task.

    python examples/verl/prepare_tasks.py --config hf --out data/verl/alfworld env=alfworld

``examples/verl/launch.sh`` writes them itself when they are missing
(``integrations.verl.launch.write_task_files``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from agentcredit.config import load_config
from agentcredit.integrations.verl.launch import write_task_files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="hf")
    parser.add_argument("--out", required=True)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    write_task_files(load_config(args.config, args.overrides), Path(args.out))


if __name__ == "__main__":
    main()
