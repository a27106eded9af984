"""HCAPO's hindsight pass (``credit/hcapo.py``): the sampled responses rescored with the outcome
in view.

``ℓ^H_{s,j} = log π_θb(y_{s,j} | h_s ⊕ o_T, y_{s,<j})``: the frozen behaviour snapshot
scores each step's response again with its rollout's final observation ``o_T`` (the
environment text after the last step, ``Trajectory.final_observation``) in the prompt.
It is the ADRS teacher pass with another text: the hindsight prefix
``[Hindsight: how this episode ended]\\n`` + ``o_T`` + ``\\n\\n`` goes where the skill
goes, at the start of the first user message (``skills.prefix``), and
``train.scoring.teacher.privileged_logprobs`` scores it through the same tree forward, with
the same admissible renormalisation. [choice] The header wording; the
HCAPO text at hand says only that the final outcome is added to the context.

The scores reach the estimator as ``credit.hindsight.HindsightScores`` (the record; this
module is the pass that computes them). ``hindsight_logprobs`` runs the pass over given rows;
``hindsight_scores``, which each update runs (``train/credit_inputs.py``), runs it on the rows of
the rollouts whose hindsight can change an HCAPO advantage only
(``credit.hcapo.hindsight_rollouts``: at least two steps and a non-zero reward, read from the
shaped rewards), leaves every other row at ``ℓ^b``, which HCAPO never reads, and averages each
step's response tokens.

Prefix trees (docs/backbones.md §0.1): the text differs per rollout, so the rows that share a
prefix are one rollout's (system turn, hindsight text, the history so far); under
``optim.layout=trees`` each rollout's head is a trunk its rows continue as prefix trees, else
every row runs alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor, nn

from agentcredit.credit.batch import CreditBatch
from agentcredit.credit.hcapo import hindsight_rollouts
from agentcredit.credit.hindsight import HindsightScores
from agentcredit.rollout.records import Trajectory
from agentcredit.skills.prefix import SkillSplicer
from agentcredit.train.scoring.teacher import privileged_logprobs
from agentcredit.train.step_tensors import StepTensors

HINDSIGHT_HEADER = "[Hindsight: how this episode ended]\n"


def hindsight_prefix(final_observation: str) -> str:
    """``[Hindsight: how this episode ended]\\n`` + ``final_observation`` + ``\\n\\n``."""
    return f"{HINDSIGHT_HEADER}{final_observation}\n\n"


class HindsightSplicer(SkillSplicer):
    """A ``SkillSplicer`` that inserts the hindsight text of a rollout's final observation,
    ``hindsight_prefix(final_observation)``, where the skill prefix goes: its ``splice`` and
    ``privileged_prompt_ids`` take the final observation in place of a skill.

    The texts differ per rollout, so their token ids are not cached (a skill
    splicer caches one entry per skill text for the whole run).
    """

    def prefix_ids(self, final_observation: str) -> tuple[int, ...]:
        """Token ids of the hindsight text ``hindsight_prefix(final_observation)``."""
        return tuple(self.tokenizer.encode(hindsight_prefix(final_observation),
                                           add_special_tokens=False))


def hindsight_logprobs(model: nn.Module, splicer: HindsightSplicer,
                       trajectories: Sequence[Trajectory], steps: StepTensors, *,
                       micro_batch_size: int, temperature: float = 1.0,
                       layout: str = "trees") -> Tensor:
    """``ℓ^H [S, L]`` of the batch's sampled tokens, 0 off the response tokens.

    ``model`` must be the frozen behaviour snapshot (the policy before this update);
    no gradient is taken and no weight changes (``train/scoring/teacher.py``). Rows follow
    ``steps`` (``tensorize_steps(trajectories)``), each with its rollout's final observation;
    scored at the policy's ``temperature``; under ``layout = "trees"`` (``optim.layout``) each
    rollout's rows run as prefix trees (the hindsight text and the shared history once).
    """
    outcomes = [t.final_observation for t in trajectories for _ in t.steps]
    return privileged_logprobs(model, splicer, steps.input_ids, steps.attention_mask,
                               steps.loss_mask, outcomes, micro_batch_size=micro_batch_size,
                               allowed=steps.allowed,
                               temperature=temperature,
                               groups=steps.step_rollout if layout == "trees" else None)


def hindsight_scores(model: nn.Module, splicer: HindsightSplicer,
                     trajectories: Sequence[Trajectory], steps: StepTensors, batch: CreditBatch,
                     old_logprobs: Tensor, *, micro_batch_size: int, temperature: float,
                     layout: str) -> HindsightScores:
    """HCAPO's ``m^H`` and ``m^b [S]`` of ``batch`` (built from ``trajectories``, rewards
    shaped), with the hindsight pass run on the rows of ``hindsight_rollouts(batch)`` only.

    Those rows are cut out of ``steps`` (with their trajectories, in the same flat order),
    scored by ``hindsight_logprobs`` and put back into an ``[S, L]`` tensor whose other rows
    hold ``old_logprobs`` (``ℓ^b``): there ``m^H = m^b``, ``ρ = 1``, the value HCAPO itself
    sets on those rollouts, so its result is the full pass's (``credit/hcapo.py`` derives
    why; tested against the full pass).
    """
    read = hindsight_rollouts(batch).cpu()  # [B]
    rows = read[steps.step_rollout.cpu()]  # [S]
    scores = old_logprobs.clone()  # [S, L]
    if bool(rows.any()):
        kept = [t for t, keep in zip(trajectories, read.tolist(), strict=True) if keep]
        scores[rows.to(scores.device)] = hindsight_logprobs(
            model, splicer, kept, steps.select(rows), micro_batch_size=micro_batch_size,
            temperature=temperature, layout=layout).to(scores)
    return HindsightScores.from_step_rows(steps.loss_mask, scores, old_logprobs)
