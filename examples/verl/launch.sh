#!/usr/bin/env bash
# Qwen2.5-1.5B-Instruct on ALFWorld or WebShop in verl 0.9 with agentcredit's credit.
#   bash examples/verl/launch.sh alfworld gigpo|vict|adrs [extra verl overrides...]
# Hyper-parameters: docs/settings.md §6 and docs/backbones.md §1 (group 8, 16 tasks per
# update, lr 1e-6, KL 0.01, clip 0.2 (ADRS 0.28), temperature 1.0, max steps 50 / 15).
set -euo pipefail
ENV=${1:?alfworld or webshop}; METHOD=${2:?gigpo, vict or adrs}; shift 2
case "$ENV" in alfworld) STEPS=50; ETA=0.1;; webshop) STEPS=15; ETA=0.02;;
  *) echo "env must be alfworld or webshop"; exit 1;; esac
case "$METHOD" in
  gigpo) AC=(credit.estimator=gigpo); CLIP=0.2;;
  vict) AC=(method=vict credit.options.backbone=gigpo); CLIP=0.2;;
  adrs) AC=(method=adrs credit.options.backbone=gigpo credit.options.eta=$ETA); CLIP=0.28;;
  *) echo "method must be gigpo, vict or adrs"; exit 1;; esac
AC+=(env=$ENV rollout.max_steps=$STEPS rollout.decoding=free)
EST=$(python -c "import sys; from agentcredit.train.config import load_config; print(load_config('hf', sys.argv[1:]).credit.estimator)" "${AC[@]}")
DATA=data/verl/$ENV
[ -f $DATA/train.parquet ] || python examples/verl/prepare_tasks.py --config hf --out $DATA "${AC[@]}"
OVR=$(printf '"%s",' "${AC[@]}"); OVR="[${OVR%,}]"
python -m verl.trainer.main_ppo \
  trainer.use_v1=true trainer.v1.trainer_mode=agentcredit \
  algorithm.adv_estimator=agentcredit.$EST algorithm.use_kl_in_reward=false \
  +agentcredit.config=hf "+agentcredit.overrides=$OVR" \
  data.train_files=$DATA/train.parquet data.val_files=$DATA/val.parquet \
  data.train_batch_size=16 data.max_prompt_length=2048 data.max_response_length=512 \
  actor_rollout_ref.model.path=Qwen/Qwen2.5-1.5B-Instruct \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.temperature=1.0 actor_rollout_ref.rollout.calculate_log_probs=true \
  actor_rollout_ref.rollout.agent.default_agent_loop=agentcredit \
  actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.optim.weight_decay=0.01 \
  actor_rollout_ref.actor.grad_clip=1.0 actor_rollout_ref.actor.use_kl_loss=true \
  actor_rollout_ref.actor.kl_loss_coef=0.01 actor_rollout_ref.actor.kl_loss_type=low_var_kl \
  actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=$CLIP \
  actor_rollout_ref.actor.entropy_coeff=0 actor_rollout_ref.actor.loss_agg_mode=token-mean \
  trainer.total_training_steps=150 trainer.test_freq=10 trainer.save_freq=10 \
  trainer.default_local_dir=runs/verl-$ENV-$METHOD trainer.logger='[console]' "$@"
