"""Credit accuracy: how close each method's credit comes to the true value of an action.

The check on a trained policy's rollouts (``check``: ``agentcredit credit-check`` and the
loop's ``credit_check/*`` metrics), the truths it scores against, computed by replaying
rollouts in their environments (``truths``: the solver's regret and Monte Carlo
continuations; ``token_truth``: the per-token truth of ADRS's token rewards), and the same
check on scripted policies of chosen skill (``regimes``: ``benchmarks/credit_regimes.py``).
The metrics themselves (rank correlations, the accuracy table) are pure functions of the
credit and the truth values and live in ``credit/accuracy.py``. docs/credit_check.md is the
protocol."""
