"""Live metrics for the tools people already watch: TensorBoard and Weights & Biases.

``metrics.jsonl`` is the record of a run; this module only mirrors each of its
lines, as it is written, to the sinks the run asks for:

- ``run.tensorboard=true``: scalars in ``RUN_DIR/tensorboard/`` through
  ``torch.utils.tensorboard`` (the ``tensorboard`` extra);
- ``run.wandb=PROJECT``: ``wandb.log`` into a run of that project named after the
  run directory, with the run's config (``pip install wandb``).

Every numeric field of a line becomes a scalar under its own name
(``rollout/success``, ``eval/valid_seen/success``, ``ppo/kl``) at step ``update``;
text fields (``eval/<split>/won``) and ``null`` values are left out. A resumed run
purges the TensorBoard events after its checkpoint, as it rolls its logs back.
Both are off by default; a sink asked for but not installed stops the run before
anything is trained, saying what to install.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentcredit.config import ConfigError

Sink = Callable[[dict[str, float], int], None]
#: the run directory's folder of TensorBoard event files
TENSORBOARD_FOLDER = "tensorboard"


class LiveMetrics:
    """The sinks of one run; ``log`` each metrics line, ``close`` at the end."""

    def __init__(self, sinks: list[tuple[Sink, Callable[[], None]]]):
        self._sinks = sinks

    @classmethod
    def open(cls, run_config, run_dir: Path, config_data: Mapping[str, Any],
             resume_update: int) -> LiveMetrics:
        """The sinks ``run_config`` (a ``RunConfig``) asks for.

        Args:
            run_dir: the run directory (TensorBoard writes to its ``tensorboard/``).
            config_data: the run's config as plain data (W&B shows it).
            resume_update: the update a resumed run restarts after (0 for a new run);
                TensorBoard hides the events logged after it.

        Raises:
            ConfigError: a sink is asked for but its package is not installed.
        """
        sinks = []
        if run_config.tensorboard:
            _require("tensorboard", "run.tensorboard = true",
                     "pip install 'agentcredit[tensorboard]' or set run.tensorboard=false")
            from torch.utils.tensorboard import SummaryWriter

            writer = SummaryWriter(str(run_dir / TENSORBOARD_FOLDER),
                                   purge_step=resume_update + 1 if resume_update else None)

            def to_tensorboard(values: dict[str, float], step: int) -> None:
                for name, value in values.items():
                    writer.add_scalar(name, value, step)
                writer.flush()

            sinks.append((to_tensorboard, writer.close))
        if run_config.wandb:
            _require("wandb", f"run.wandb = {run_config.wandb!r}",
                     "pip install wandb or leave run.wandb empty")
            wandb = importlib.import_module("wandb")
            session = wandb.init(project=run_config.wandb, name=run_config.name,
                                 dir=str(run_dir), config=dict(config_data))
            sinks.append((lambda values, step: session.log(values, step=step), session.finish))
        return cls(sinks)

    def log(self, record: Mapping[str, Any]) -> None:
        """Send the numeric fields of one metrics line at its ``update``."""
        if not self._sinks:
            return
        values = {name: float(value) for name, value in record.items()
                  if name not in ("kind", "update") and isinstance(value, int | float)
                  and not isinstance(value, bool) and math.isfinite(value)}
        for send, _ in self._sinks:
            send(values, int(record.get("update", 0)))

    def close(self) -> None:
        """Flush and close every sink."""
        for _, close in self._sinks:
            close()
        self._sinks = []


def _require(package: str, setting: str, fix: str) -> None:
    if importlib.util.find_spec(package) is None:
        raise ConfigError(f"{setting} needs the {package} package, which is not installed: "
                          f"{fix}")
