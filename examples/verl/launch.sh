#!/usr/bin/env bash
# An agentcredit run in verl 0.9 on GPUs: the papers' settings (docs/settings.md §6,
# config/presets/hf.yaml) on one node, verl's keys derived from the agentcredit config.
#   bash examples/verl/launch.sh alfworld|webshop grpo|gigpo|vict|adrs \
#       [--backbone qwen2.5-0.5b|qwen2.5-1.5b|qwen2.5-7b] [--dry-run] \
#       [agentcredit overrides ...] [-- verl overrides ...]
# --dry-run prints the resolved verl config after verl's own checks and exits (no GPU needed).
# Backbones: 0.5B on 1 GPU, 1.5B (default) on 2, 7B on 8 with 2-way tensor-parallel rollouts.
set -euo pipefail
exec python -m agentcredit.integrations.verl.launch "$@"
