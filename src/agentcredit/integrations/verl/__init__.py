"""agentcredit inside verl 0.9 (docs/verl.md): the same credit functions, no fork of verl.

Modules that never import verl (tested without it):

    rows.py      verl's per-step rows ⇄ the project's ``CreditBatch``; advantages per token
    episode.py   one rollout of a project environment through an async generate function
    launch.py    a verl launch from an agentcredit config (``examples/verl/launch.sh``)
    supported.py what of an agentcredit config the verl path runs; the rest is refused

Modules that import verl (``pip install agentcredit[verl]``):

    plugin.py      the ``verl.plugins`` entry point: registers everything below
    agent_loop.py  ``AgentLoopBase`` over the project's environments, one output per step
    trainer.py     the v1 ``PPOTrainer`` whose advantage step calls the project's registry
"""

#: the name of agentcredit's agent loop and of its trainer in verl's registries.
PLUGIN_NAME = "agentcredit"
#: verl's ``algorithm.adv_estimator`` for the project's estimator ``name``: this prefix + name.
ESTIMATOR_PREFIX = "agentcredit."
