"""The forwards and backwards of one optimiser step over prefix trees, shared by the PPO update
(``train.ppo``) and SFT (``train.warm_start.sft``) (docs/backbones.md §0.1).

``train_trees`` runs, for each tree, its trunk with gradients (``tree_forward.trunk_of``), then
for each branch batch its forward (``branch_forward``), the caller's loss and
``loss.backward()``, and after the tree's last branch batch ``Trunk.backward()``. The
parameters' ``.grad`` then hold the gradient of the sum of the branch losses, as one autograd
graph over every row would give, while one branch batch's activations are held at a time; the
caller clips and steps. With ``checkpointing`` (``optim.gradient_checkpointing``) every forward
keeps only its decoder layers' inputs and recomputes the layers in the backward
(``train.activation_checkpointing``): the same gradients, less activation memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import Tensor, nn

from agentcredit.train.activation_checkpointing import recomputed_layers
from agentcredit.train.prefix_tree import PrefixTree
from agentcredit.train.scoring.tree_forward import Rows, branch_forward, trunk_of

BranchLoss = Callable[[Tensor, Tensor | None, Tensor], tuple[Tensor, dict[str, float]]]
"""``(logprobs, entropies, members) → (loss, stats)`` of one branch batch: its new log-probs
and entropies ``[b, w]`` (``branch_forward``; entropies ``None`` unless asked for), and
``members`` ``[b]``, the indices of its rows in ``Rows``. ``loss`` is the scalar to
backpropagate; ``stats`` are floats the caller sums over the branch batches."""


def train_trees(model: nn.Module, trees: Sequence[PrefixTree], rows: Rows, *,
                branch_batch: int, branch_loss: BranchLoss, with_entropy: bool = False,
                entropy_grad: bool = True, temperature: float = 1.0,
                checkpointing: bool = False) -> list[dict[str, float]]:
    """Accumulate into the parameters' ``.grad`` the gradient of ``Σ branch_loss`` over every
    branch batch of ``trees``.

    Args:
        model: the causal LM being trained (``tree_forward``'s module docstring).
        trees: the layout of the step's rows (``prefix_tree.layout_trees``).
        rows: the rows the trees index.
        branch_batch: rows per branch forward (``optim.micro_batch_size``); the summed gradient
            does not depend on it.
        branch_loss: each branch batch's loss and statistics (``BranchLoss``).
        with_entropy: pass the entropies at the scored tokens to ``branch_loss``.
        entropy_grad: with them in the autograd graph (a loss term); ``False``: computed
            without one, for a logged figure.
        temperature: ``T > 0``: the statistics of ``softmax(z / T)``.
        checkpointing: recompute the decoder layers in the backward
            (``activation_checkpointing.recomputed_layers``).

    Returns:
        each branch batch's ``stats``, in the order they ran.
    """
    parts: list[dict[str, float]] = []
    with recomputed_layers(model, checkpointing):
        for tree in trees:
            trunk = trunk_of(model, tree, rows, grad=True)
            for batch in tree.batches(branch_batch):
                logprobs, entropies = branch_forward(
                    model, trunk, tree, batch, rows, with_entropy=with_entropy,
                    entropy_grad=entropy_grad, temperature=temperature)
                loss, stats = branch_loss(logprobs, entropies, tree.rows[batch])
                loss.backward()
                parts.append(stats)
            trunk.backward()
    return parts
