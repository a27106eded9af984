"""Measuring a policy and its credit: evaluation on the validation splits (``evaluate``) and
the prompting baselines (``eval_modes``), success with its bootstrap interval (``outcomes``),
the ADRS probe gap (``probes``), the VICT interface audit (``audit``), and credit accuracy
against replayed truths (the ``credit_check`` package)."""
