"""The credit check (``agentcredit credit-check``, docs/credit_check.md): how close each
method's credit comes to the true value of an action.

The check on a trained policy's rollouts (``check``: ``agentcredit credit-check`` and the
loop's ``credit_check/*`` metrics), the truths it scores against, computed by replaying
rollouts in their environments (``truths``: the solver's regret and Monte Carlo
continuations; ``token_truth``: the per-token truth of ADRS's token rewards), the same check
on scripted policies of chosen skill (``regimes``: ``benchmarks/credit_regimes.py``), and the
metrics (``metrics``: rank correlations, the accuracy table), pure functions of the credit and
the truth values. docs/credit_check.md is the protocol."""
