#!/usr/bin/env bash
# GPU smoke test: three updates of Qwen2.5-0.5B-Instruct on one GPU (ALFWorld, VICT/GiGPO,
# 4 tasks x 4 rollouts of at most 10 steps), printing verl's throughput and agentcredit's
# credit metrics. `bash examples/verl/smoke_gpu.sh --dry-run` checks the launch without a GPU.
set -euo pipefail
LAUNCH=("$(dirname "$0")/launch.sh" alfworld vict --backbone qwen2.5-0.5b
  rollout.tasks_per_update=4 rollout.group_size=4 rollout.max_steps=10 run.updates=3
  run.eval_every=0 run.checkpoint_every=3 -- actor_rollout_ref.rollout.gpu_memory_utilization=0.4)
if [ "${1:-}" = "--dry-run" ]; then exec bash "${LAUNCH[@]:0:1}" --dry-run "${LAUNCH[@]:1}"; fi
bash "${LAUNCH[@]}" 2>&1 | tee /tmp/agentcredit-verl-smoke.log
grep -E "perf/throughput|timing_s/step|credit/" /tmp/agentcredit-verl-smoke.log | tail -20
