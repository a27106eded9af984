"""The VICT correction, the final advantage and the eligibility invariant (docs/vict.md §4.6, 4.7).

Symbols → variables (``S`` = steps of the batch):
    ``A^VICT_{i,t} = Σ_{j ∈ C*_i} δ̂_{i,j} · ω_{i,t,j} / Z_{i,j}`` → ``assemble(...) [S]``;
    ``λ = γ_λ · median|A^base| / (median_{nonzero}|A^VICT| + ε)``,
    ``c = quantile_0.95(|A^base|)`` → ``correction_scale``;
    ``A^final = A^base + λ · clip(A^VICT, −c, c)`` → ``final_advantage``.
``median|A^base|`` and the quantile run over the steps of groups with signal (by default),
``median|A^VICT|`` over the batch's steps where it is non-zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from agentcredit.verifier.trace import RolloutTrace


class EligibilityError(AssertionError):
    """A non-zero VICT correction without a valid proof (docs/vict.md §4.7): a bug, never a
    statistic."""


@dataclass(frozen=True)
class Contribution:
    """One atom's share of one step's ``A^VICT`` (a ledger row before scaling).

    Attributes:
        rollout: ``i``.
        step: ``t`` inside the rollout.
        flat_step: the step's index in the batch's flat ``[S]`` layout.
        atom_id: ``j``.
        delta_hat: ``δ̂_{i,j}``.
        weight: ``ω_{i,t,j}``.
        share: ``ω_{i,t,j} / Z_{i,j}`` (the shares of one atom sum to 1).
        relations: the witness relations (or a control's rule name).
        sources: the evidence behind them.
    """

    rollout: int
    step: int
    flat_step: int
    atom_id: str
    delta_hat: float
    weight: float
    share: float
    relations: tuple[str, ...]
    sources: tuple[str, ...]

    @property
    def amount(self) -> float:
        """``δ̂_{i,j} · ω_{i,t,j} / Z_{i,j}``."""
        return self.delta_hat * self.share


def assemble(contributions: Sequence[Contribution], num_steps: int,
             device: torch.device | str | None = None) -> Tensor:
    """``A^VICT [S]`` (float64, on ``device``): the contributions summed per step."""
    out = torch.zeros(num_steps, dtype=torch.float64)
    if contributions:
        index = torch.tensor([c.flat_step for c in contributions], dtype=torch.long)
        values = torch.tensor([c.amount for c in contributions], dtype=torch.float64)
        out.index_add_(0, index, values)
    return out.to(device) if device is not None else out


def signal_steps(base: Tensor, step_group: Tensor, num_groups: int) -> Tensor:
    """``[S]`` bool: the steps of groups in which some ``A^base`` is non-zero (docs/vict.md §4.6).

    ``step_group [S]`` is each step's dense group index.
    """
    nonzero = torch.zeros(num_groups, dtype=torch.long, device=base.device)
    nonzero.index_add_(0, step_group.to(base.device), (base != 0).long())  # [G]
    return nonzero[step_group.to(base.device)] > 0


def correction_scale(base: Tensor, vict: Tensor, *, gamma_lambda: float, eps: float,
                     clip_quantile: float, base_steps: str,
                     signal: Tensor | None = None) -> tuple[float, float]:
    """``(λ, c)`` for ``base [S]`` = ``A^base`` and ``vict [S]`` = ``A^VICT``.

    ``median|A^base|`` and the quantile ``c`` run over a pool of steps chosen by
    ``base_steps`` (``VICTConfig.lambda_base_steps``): ``signal`` (default, docs/vict.md §4.6
    [choice]) the steps where ``signal [S]`` is True, i.e. the steps of groups carrying some
    non-zero ``A^base``, so all-fail and all-success groups cannot drive ``λ`` or ``c`` to 0;
    ``all`` every step of the batch (the papers' literal reading); ``nonzero`` the steps whose
    own ``A^base ≠ 0``. ``median|A^VICT|`` runs over the steps where ``A^VICT ≠ 0``.
    ``λ = 0`` only when ``A^VICT`` is zero everywhere or the pool has no non-zero ``A^base``.

    Tested properties: adding all-fail groups to a batch changes neither ``λ`` nor ``c``.
    """
    base_abs = base.to(torch.float64).abs()
    vict_abs = vict.to(torch.float64).abs()
    nonzero = vict_abs[vict_abs > 0]
    if base_steps == "signal":
        if signal is None:
            raise ValueError("correction_scale(base_steps='signal') needs the signal mask [S]")
        pool = base_abs[signal.to(base_abs.device)]
    elif base_steps == "nonzero":
        pool = base_abs[base_abs > 0]
    else:
        pool = base_abs
    clip = float(torch.quantile(pool, clip_quantile)) if pool.numel() else 0.0
    if nonzero.numel() == 0:
        return 0.0, clip
    base_median = float(torch.quantile(pool, 0.5)) if pool.numel() else 0.0
    lam = gamma_lambda * base_median / (float(torch.quantile(nonzero, 0.5)) + eps)
    return lam, clip


def final_advantage(base: Tensor, vict: Tensor, lam: float, clip: float) -> tuple[Tensor, Tensor]:
    """``(A^final, λ·clip(A^VICT, −c, c))``, both ``[S]`` in ``base``'s dtype, ``A^final`` being
    exactly ``A^base + correction`` in that dtype."""
    correction = (lam * vict.to(torch.float64).clamp(-clip, clip)).to(base.dtype)  # [S]
    return base + correction, correction


def eligibility_failures(vict: Tensor, step_rollout: Sequence[int], step_index: Sequence[int],
                         traces: Sequence[RolloutTrace], conforming: Sequence[bool],
                         cores: Sequence[frozenset[str]],
                         delta_hat: Sequence[dict[str, float]]) -> tuple[int, list[str]]:
    """docs/vict.md §4.7's invariant on every non-zero entry of ``A^VICT [S]``:
    ``(checked, failures)``.

    ``A^VICT_{i,t} ≠ 0`` requires: rollout ``i``'s task conforms, and some atom
    ``j ∈ C*_i`` with ``δ̂_{i,j} ≠ 0`` has a proof edge ``(t, j, r)`` whose proof
    record satisfies the dependencies. The check reads the traces' edges
    directly, independently of how the contributions were assembled; each
    failure is a message naming the entry and what is missing.
    """
    nonzero = torch.nonzero(vict).flatten().tolist()
    failures = []
    for s in nonzero:
        i, t = step_rollout[s], step_index[s]
        trace = traces[i]
        if not conforming[i]:
            failures.append(f"A^VICT[rollout {i}, step {t}] = {float(vict[s]):.6g} but task "
                            f"{trace.task_id!r} is non-conforming")
            continue
        eligible = {e.atom_id for e in trace.edges if e.step == t and e.valid and e.weight > 0}
        if not any(j in eligible and delta_hat[i].get(j, 0.0) != 0.0 for j in cores[i]):
            failures.append(
                f"A^VICT[rollout {i}, step {t}] = {float(vict[s]):.6g} has no proof: core "
                f"{sorted(cores[i])}, atoms with a valid edge at this step {sorted(eligible)}, "
                f"non-zero δ̂ {sorted(j for j, d in delta_hat[i].items() if d != 0.0)}")
    return len(nonzero), failures


def check_eligibility(vict: Tensor, step_rollout: Sequence[int], step_index: Sequence[int],
                      traces: Sequence[RolloutTrace], conforming: Sequence[bool],
                      cores: Sequence[frozenset[str]],
                      delta_hat: Sequence[dict[str, float]]) -> int:
    """``eligibility_failures`` that raises on any failure; returns the entries checked.

    Raises:
        EligibilityError: naming the first entry that fails and why.
    """
    checked, failures = eligibility_failures(vict, step_rollout, step_index, traces, conforming,
                                             cores, delta_hat)
    if failures:
        raise EligibilityError(f"{len(failures)} of {checked} non-zero VICT corrections break "
                               f"the eligibility invariant (docs/vict.md §4.7); first: "
                               f"{failures[0]}")
    return checked
