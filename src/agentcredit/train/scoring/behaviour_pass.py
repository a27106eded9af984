"""The behaviour pass (docs/backbones.md §1): the log-probs of a batch's sampled response
tokens under a model, with the prompts they were sampled from.

``score_steps`` runs it: under the pre-update policy it gives PPO's behaviour log-probs
``ℓ^b`` (``optim.recompute_old_logprobs``; ``scoring/passes.py``), under the frozen reference
the KL's ``ℓ_ref``; the ADRS probe gap and the credit check score their student rows with it
too. It is the one tree forward (``scoring/tree_forward.py``) over the step rows, which are
``Rows`` already (``train.step_tensors.StepTensors``), laid out by ``optim.layout``
(``train.prefix_tree.layout_trees``).
"""

from __future__ import annotations

from torch import Tensor, nn

from agentcredit.train.prefix_tree import layout_trees
from agentcredit.train.scoring.tree_forward import score_trees
from agentcredit.train.step_tensors import StepTensors


def score_steps(model: nn.Module, steps: StepTensors, micro_batch_size: int,
                temperature: float = 1.0, layout: str = "trees") -> Tensor:
    """``log π(y_l | y_<l)`` of the response tokens of ``steps`` under ``model`` at
    ``temperature``, ``[S, L]`` (0 elsewhere), no grad; renormalised over ``steps.allowed``
    when the steps were sampled with admissible decoding.

    ``layout`` (``optim.layout``): ``trees`` runs each trajectory's rows as prefix trees,
    ``rows`` runs the rows sorted by length; either way ``micro_batch_size`` rows per forward,
    and the same log-probs to float rounding."""
    return score_trees(model, layout_trees(model, steps, layout), steps,
                       branch_batch=micro_batch_size, temperature=temperature)
