"""A run on disk: what ``agentcredit train`` writes and ``agentcredit report`` reads.

- ``directory``: the run folder (``RunDirectory``): creating, locking and resuming it, its
  logs and checkpoints.
- ``random_streams``: every random stream of a run (``RandomStreams``), saved with each
  checkpoint.
- ``saved_rollouts``: the updates saved for the report's viewer (``run.save_rollouts``).
- ``live_metrics``: the metrics mirrored to TensorBoard and Weights & Biases as they are logged.

No module here imports torch at import time: checkpoints and RNG states import it where they
need it, so the report reads a run without loading it.
"""
