"""Training: the update step and the run loop around it (docs/design.md).

At the top, the loop and its update: ``loop`` (the run), ``run_state`` (what a run holds,
built once), ``update`` (one update), ``ppo`` and
``loss`` (the PPO step), ``padding`` (micro-batch padding), ``dapo``, ``credit_inputs`` (what
the estimator declares it needs), ``build`` (the model, collector and tasks of a run) and
``model_loading`` (every command's model and tokenizer). The run's config is
``agentcredit.config``, the environment suites ``agentcredit.envs.suites``. The stages around
the update live in sub-packages:

- ``warm_start``: the RL starting policy: the embedded tiny model and its tokenizer, the skill
  texts a run reads, SFT on expert demonstrations.
- ``scoring``: the extra scoring passes over a batch: token log-probs, the ADRS teacher,
  HCAPO's hindsight pass, VICT's verifier traces.
- ``evaluation``: evaluation and its prompting modes, success with its interval, the ADRS
  probe gap, the VICT interface audit, the credit-accuracy check and its truths.

The public modules, the ones ``integrations/`` may import (``tests/test_import_graph.py``):
``build`` and ``scoring.verifier_traces``. Importing this package loads nothing else (no
torch).
"""
