"""What each update prepares for credit: the batch with the inputs the estimator declared.

An estimator (``credit.registry``) and an auxiliary loss (``credit.aux_losses``)
declare the inputs they read: verifier ``traces`` (VICT and its controls), the
privileged ``teacher``'s scores ``ℓ^T`` (ADRS, RLSD and the auxiliary losses), the
``reference`` policy's log-probs and HCAPO's ``hindsight`` scores. ``CreditInputs.prepare``
calls the ``teacher`` and ``hindsight`` passes (model forwards: ``scoring/teacher.py``,
``scoring/hindsight_pass.py``) and the verifier tracer (``scoring/verifier_traces.py``) among
``scoring_passes(config)`` (``train/scoring/passes.py``, which says why each runs) and nothing
else: for GRPO it runs no forward. It puts the ``reference`` log-probs it is given into the
teacher's ``TokenScores``, adds DAPO's overlong penalty (``credit/overlong.py``) to the step
rewards when ``rollout.overlong_buffer`` is set, and logs the share of rows the hindsight pass
scored as ``score/hindsight_row_share``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from torch import Tensor, nn

from agentcredit.config import TrainConfig
from agentcredit.credit import CreditBatch, TokenScores
from agentcredit.credit.hcapo import hindsight_rollouts
from agentcredit.credit.overlong import OverlongPenalty, response_lengths
from agentcredit.envs.suites import EnvSuite
from agentcredit.rollout.records import Trajectory
from agentcredit.skills import SkillProvider, SkillSplicer
from agentcredit.train.scoring.hindsight_pass import HindsightSplicer, hindsight_scores
from agentcredit.train.scoring.passes import scoring_passes
from agentcredit.train.scoring.teacher import teacher_logprobs
from agentcredit.train.scoring.verifier_traces import VerifierTracer
from agentcredit.train.step_tensors import StepTensors, credit_batch


@dataclass
class PreparedCredit:
    """One update's credit input.

    Attributes:
        batch: the credit batch, with ``traces`` / ``tokens`` when declared.
        teacher: ``ℓ^T [S, L]`` for an auxiliary loss, or ``None``.
        seconds: time spent per preparation phase (``teacher``, ``hindsight``, ``trace``).
        metrics: what the preparation logs (``reward/overlong_*`` with DAPO's penalty).
    """

    batch: CreditBatch
    teacher: Tensor | None
    seconds: dict[str, float]
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)


class CreditInputs:
    """Prepares, each update, the ``teacher``, ``hindsight`` and ``traces`` passes among
    ``scoring_passes(config)``.

    Args:
        config: the run.
        suite: its environment suite (verifiers for traces).
        tokenizer: the policy's tokenizer (the teacher's skill splicer).
        provider: the privileged skill texts.
    """

    def __init__(self, config: TrainConfig, suite: EnvSuite, tokenizer,
                 provider: SkillProvider):
        passes = scoring_passes(config)
        self.tracer = VerifierTracer(suite.make_env) if "traces" in passes else None
        # the skill shares the prompt budget: the privileged prompt is left-truncated to it
        self.splicer = (SkillSplicer(tokenizer, config.rollout.max_prompt_tokens)
                        if "teacher" in passes else None)
        self.hindsight = (HindsightSplicer(tokenizer, config.rollout.max_prompt_tokens)
                          if "hindsight" in passes else None)
        self.rollout = config.rollout
        self.overlong = OverlongPenalty.of(config.rollout)
        self.provider = provider
        self.micro_batch_size = config.optim.score_micro_batch_size
        self.layout = config.optim.layout

    def prepare(self, model: nn.Module, trajectories: Sequence[Trajectory], steps: StepTensors,
                old_logprobs: Tensor, ref_logprobs: Tensor | None, update: int
                ) -> PreparedCredit:
        """The credit batch of ``trajectories``; ``model`` is the pre-update policy."""
        seconds = {}
        teacher = None
        if self.splicer is not None:  # ℓ^T under the frozen behaviour snapshot
            began = time.perf_counter()
            teacher = teacher_logprobs(model, self.splicer, self.provider, trajectories, steps,
                                       micro_batch_size=self.micro_batch_size,
                                       temperature=self.rollout.policy_temperature,
                                       layout=self.layout)  # [S, L]
            seconds["teacher"] = time.perf_counter() - began
        traces = None
        if self.tracer is not None:
            began = time.perf_counter()
            traces = self.tracer.trace(trajectories)
            seconds["trace"] = time.perf_counter() - began
        batch = credit_batch(trajectories, traces)
        # DAPO: shaped before any estimator (or the hindsight rows' choice) reads it
        batch, metrics = self.overlong.apply(batch, response_lengths(trajectories))
        if self.hindsight is not None:  # ℓ^H: the same pass with the final observation
            began = time.perf_counter()
            hindsight = hindsight_scores(model, self.hindsight, trajectories, steps, batch,
                                         old_logprobs, micro_batch_size=self.micro_batch_size,
                                         temperature=self.rollout.policy_temperature,
                                         layout=self.layout)
            batch = dataclasses.replace(batch, hindsight=hindsight)
            seconds["hindsight"] = time.perf_counter() - began
            metrics["score/hindsight_row_share"] = float(
                hindsight_rollouts(batch)[batch.step_rollout].double().mean())
        if teacher is not None:
            batch = dataclasses.replace(batch, tokens=TokenScores.from_step_rows(
                steps.loss_mask, teacher, old_logprobs, ref_logprobs, update=update))
        return PreparedCredit(batch, teacher, seconds, metrics)

