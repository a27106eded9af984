"""The ``verl.plugins`` entry point, ``agentcredit = agentcredit.integrations.verl.plugin``.

``import verl`` loads every entry point of that group (verl 0.9, ``verl/__init__.py``;
``VERL_USE_EXTERNAL_PLUGINS=none`` turns discovery off). Importing this module registers:

- the agent loop ``agentcredit`` (``agent_loop.AgentCreditLoop``) in verl's agent-loop registry;
- the trainer ``agentcredit`` (``trainer.AgentCreditTrainer``) in verl's v1 trainer registry;
- every estimator of the project's registry as ``agentcredit.<name>`` in verl's advantage
  registry (``core_algos.register_adv_est``), so ``algorithm.adv_estimator=agentcredit.vict``
  is a name verl knows. verl's own advantage path hands an estimator only token rewards, a
  mask and the group uid, which cannot carry steps, anchors or traces; so the registered
  function refuses to run there and says to select the agentcredit trainer, whose advantage
  step runs the estimator on the per-step rows.
"""

from __future__ import annotations

from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

from agentcredit.credit import estimator_names
from agentcredit.integrations.verl import agent_loop, trainer

AGENT_LOOP_NAME = agent_loop.AGENT_NAME
TRAINER_NAME = trainer.TRAINER_NAME
ESTIMATOR_PREFIX = trainer.ESTIMATOR_PREFIX


def _needs_agentcredit_trainer(name: str):
    def estimator(*args, **kwargs):
        raise ValueError(
            f"algorithm.adv_estimator={ESTIMATOR_PREFIX}{name} runs only in agentcredit's "
            f"trainer, which sees the per-step rows: set trainer.use_v1=true "
            f"trainer.v1.trainer_mode={TRAINER_NAME} and "
            f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_LOOP_NAME}.")

    estimator.__qualname__ = f"agentcredit_{name}"
    return estimator


for _name in estimator_names():
    if ESTIMATOR_PREFIX + _name not in ADV_ESTIMATOR_REGISTRY:
        register_adv_est(ESTIMATOR_PREFIX + _name)(_needs_agentcredit_trainer(_name))
