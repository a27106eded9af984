"""Training: the update step and the run loop around it (docs/design.md).

At the top, the loop and its update: ``loop`` (the run), ``run_state`` (what a run holds,
built once), ``update`` (one update), ``step_tensors`` (a batch's steps as training rows and
as the credit batch), ``ppo`` and ``loss`` (the PPO step), ``prefix_tree`` (step rows as
prefix trees), ``batch_source`` (where each update's groups come from, with DAPO's dynamic
sampling), ``credit_inputs`` (what the estimator declares it needs), ``rollout_metrics``
(what an update logs about its rollouts), ``build`` (the model, collector and tasks of a run)
and ``model_loading`` (every command's model and tokenizer). The run's config is
``agentcredit.config``, the environment suites ``agentcredit.envs.suites``. The stages around
the update live in sub-packages:

- ``warm_start``: the RL starting policy: the embedded tiny model and its tokenizer, the
  cache of embedded warm starts, the skill texts a run reads, SFT on expert demonstrations.
- ``scoring``: the scoring passes over a batch: the one tree forward every pass uses, the
  behaviour pass (the sampler's log-probs recomputed), the ADRS teacher, HCAPO's hindsight
  pass, VICT's verifier traces.
- ``evaluation``: evaluation and its prompting modes, success with its interval, the ADRS
  probe gap, the VICT interface audit, the credit-accuracy check and its truths.

The public modules, the ones ``integrations/`` may import (``tests/test_import_graph.py``):
``build`` and ``scoring.verifier_traces``. Importing this package loads nothing else (no
torch).
"""
