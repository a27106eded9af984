#!/usr/bin/env bash
# GPU smoke test: a few updates of Qwen2.5-0.5B-Instruct on one GPU (ALFWorld, VICT/GiGPO),
# printing verl's throughput metrics (perf/throughput, timing_s/step). Not runnable on CPU.
set -euo pipefail
bash examples/verl/launch.sh alfworld vict \
  actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct trainer.n_gpus_per_node=1 \
  trainer.nnodes=1 trainer.total_training_steps=3 trainer.test_freq=-1 trainer.save_freq=-1 \
  data.train_batch_size=4 actor_rollout_ref.rollout.n=4 \
  "+agentcredit.overrides=[\"env=alfworld\",\"method=vict\",\"credit.options.backbone=gigpo\",\"rollout.max_steps=10\",\"rollout.decoding=free\"]" \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 2>&1 | tee /tmp/agentcredit-verl-smoke.log
grep -E "perf/throughput|timing_s/step|credit/" /tmp/agentcredit-verl-smoke.log | tail -20
