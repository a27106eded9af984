"""SALT: step-level advantages from the group's trajectory graph (Li et al., EACL Findings 2026,
"step-level advantage assignment via trajectory graph").

SALT starts from a group-relative trajectory advantage and shares it between
the rollouts that took the same transition. The rollouts of one group are
merged into a graph whose nodes are transitions ``(s_t, a_t, s_{t+1})``; a step
gets the mean advantage of the rollouts that pass through its node, so a
shared prefix (the same moves from the same start) carries the group's average
verdict, and the steps where rollouts diverge keep their own rollout's.

    A_i        = backbone advantage of rollout i        (GRPO z-score, or RLOO)
    n(i, t)    = (g_i, s_{i,t}, a_{i,t}, s_{i,t+1})     the node of step t of rollout i
    R(n)       = {i' : some step of rollout i' has node n}
    A^SALT_{i,t} = (1/|R(n)|) Σ_{i'∈R(n)} A_{i'},   n = n(i, t)

A node visited by one rollout only gives that rollout's own ``A_i``.

Symbols → variables: ``A_i`` → ``rollout_adv [B]``; ``n(i, t)`` → ``node [S]``
(``transition_nodes``); ``|R(n)|`` → ``visits [K]``; ``A^SALT`` → ``step_advantages [S]``.

[choice] Node identity (the paper does not publish it): ``s_t`` is the step's
anchor key (the observation text the policy saw, as GiGPO's anchor state),
``a_t`` the action text sent to the environment (``CreditBatch.action_keys``),
``s_{t+1}`` the next step's anchor key; a rollout's last step goes to one
terminal node ``END``, so two last steps merge when they took the same action
from the same observation. Nodes never join rollouts of different groups.

[choice] A rollout that passes a node several times (a loop) counts once in
its mean: the node averages over rollouts, not over visits, so one looping
rollout cannot outvote the others.

[choice] No renormalisation after averaging: each ``A^SALT`` is a convex
combination of the group's ``A_i``, so the scale stays the backbone's.

Tested properties (tests/credit/test_salt.py): shared prefixes get the node
mean, divergent steps keep theirs; a loop counts once; nodes never cross groups;
with no shared node SALT is its backbone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from agentcredit.config.schema import validate
from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.grpo import GRPOConfig, episode_group_diagnostics
from agentcredit.credit.registry import get_estimator, register_estimator
from agentcredit.credit.result import CreditResult
from agentcredit.credit.rloo import RLOOConfig

#: the next state of a rollout's last step.
END = "\x00END"


@dataclass(frozen=True)
class SALTConfig:
    """Options of SALT (Li et al. 2026).

    Attributes:
        backbone: the trajectory advantage SALT averages over graph nodes, with its own
            options: a ``GRPOConfig`` or ``RLOOConfig`` (``credit.options.backbone=rloo``).
    """

    config_name: ClassVar[str] = "salt"

    backbone: GRPOConfig | RLOOConfig = field(default_factory=GRPOConfig)

    def __post_init__(self) -> None:
        validate(self)


def transition_nodes(batch: CreditBatch) -> Tensor:
    """Dense node ids ``[S]`` in ``0..K-1`` (first appearance order) of ``(g, s_t, a_t, s_{t+1})``.

    Needs ``batch.action_keys``; see the module docstring for the node identity.
    """
    if batch.action_keys is None:
        raise ValueError("salt needs each step's action text: build the batch with "
                         "CreditBatch.from_lists(..., action_keys=...) (the trainer's "
                         "train.step_tensors.credit_batch records them).")
    groups = batch.group_index[batch.step_rollout].tolist()  # [S]
    rollouts = batch.step_rollout.tolist()
    keys = batch.anchor_keys
    ids: dict[tuple, int] = {}
    dense = []
    for s, (group, action) in enumerate(zip(groups, batch.action_keys, strict=True)):
        last = s + 1 == len(rollouts) or rollouts[s + 1] != rollouts[s]
        node = (group, keys[s], action, END if last else keys[s + 1])
        dense.append(ids.setdefault(node, len(ids)))
    return torch.tensor(dense, dtype=torch.long, device=batch.step_rollout.device)


def node_mean(rollout_adv: Tensor, node: Tensor, step_rollout: Tensor) -> tuple[Tensor, Tensor]:
    """``(A^SALT [S], visits [S])``: each step's node mean of ``rollout_adv [B]`` over the distinct
    rollouts through the node, and how many rollouts that is."""
    num_rollouts = rollout_adv.shape[0]
    pairs = torch.unique(node * num_rollouts + step_rollout)  # [P] distinct (node, rollout)
    pair_node, pair_rollout = pairs // num_rollouts, pairs % num_rollouts
    num_nodes = int(node.max()) + 1
    values = rollout_adv.to(torch.float64)
    sums = torch.zeros(num_nodes, dtype=torch.float64, device=values.device)
    sums.index_add_(0, pair_node, values[pair_rollout])  # [K]
    visits = torch.bincount(pair_node, minlength=num_nodes)  # [K] = |R(n)|
    return (sums / visits.clamp(min=1))[node].to(rollout_adv.dtype), visits[node]


@register_estimator("salt", SALTConfig, claims=("constant_group_zero", "permutation"))
def salt(batch: CreditBatch, config: SALTConfig) -> CreditResult:
    """SALT step advantages ``A^SALT_{i,t}`` = the mean backbone advantage of the rollouts through
    step ``(i, t)``'s transition node (see the module docstring for the equations).

    Returns ``step_advantages [S]``; ``extras``: ``episode_advantage [B]`` (the backbone's
    ``A_i``, VICT's direction) and ``salt_nodes [S]``; diagnostics: the backbone's plus
    ``shared_node_step_share`` (steps whose node more than one rollout took) and
    ``num_nodes``.
    """
    base = get_estimator(config.backbone.config_name)(batch, config.backbone)
    lengths = batch.episode_lengths
    rollout_adv = base.step_advantages[torch.cumsum(lengths, 0) - lengths]  # [B], A_i
    node = transition_nodes(batch)  # [S]
    advantages, visits = node_mean(rollout_adv, node, batch.step_rollout)
    diagnostics = episode_group_diagnostics(batch, rollout_adv)
    diagnostics.update({
        "num_nodes": float(int(node.max()) + 1),
        "shared_node_step_share": (visits > 1).double().mean().item(),
        "mean_abs_step_advantage": advantages.abs().double().mean().item(),
    })
    return CreditResult(step_advantages=advantages, diagnostics=diagnostics,
                        extras={"episode_advantage": rollout_adv, "salt_nodes": node})
