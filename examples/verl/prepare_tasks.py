"""Write verl's train/val parquet files for an agentcredit config: one row per task.

    python examples/verl/prepare_tasks.py --config hf --out data/alfworld -- env=alfworld

Each row names its task (``ac_task``) and asks for agentcredit's agent loop; the prompt
column is a placeholder, since the loop builds every step's prompt itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from agentcredit.train.config import load_config
from agentcredit.train.env_suites import build_env_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="hf")
    parser.add_argument("--out", required=True)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    config = load_config(args.config, args.overrides)
    suite = build_env_suite(config.env)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for split, name in (("train", "train"), (suite.validation_splits[0], "val")):
        rows = [{"data_source": f"agentcredit/{config.env.name}", "agent_name": "agentcredit",
                 "prompt": [{"role": "user", "content": task.instruction}],
                 "ac_task": {"split": split, "task_id": task.task_id}}
                for task in suite.tasks(split)]
        pd.DataFrame(rows).to_parquet(out / f"{name}.parquet")
        print(f"{name}: {len(rows)} tasks -> {out / f'{name}.parquet'}")


if __name__ == "__main__":
    main()
