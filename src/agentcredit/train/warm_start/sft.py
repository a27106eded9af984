"""SFT warm start: behaviour cloning on the expert's trajectories of the train split.

``expert_demonstrations`` replays the environment's demonstration (ALFWorld:
a partially-observable search, ``envs.alfworld.expert``; else ``env.expert``,
the planner) to record what the agent would have seen at each step;
``demonstration_steps`` turns every expert step into the same training sample a
rollout step is (the windowed chat prompt plus the response,
``rollout.records.Step``), so SFT and RL train on one format. ``run_sft``
minimises the token-mean negative log-likelihood of the response tokens only
(the loss mask of ``tensorize_steps``), each batch of whole demonstrations run as prefix
trees (``train.prefix_tree``). ``with_skill_demonstrations`` adds the skill-prefixed
copies of ``sft.skill_share``.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from agentcredit.envs.base import Environment, Task
from agentcredit.rollout.actions import format_action
from agentcredit.rollout.admissible import ActionTrie, Decoding
from agentcredit.rollout.prompts import (
    LAYOUT_WINDOW,
    HistoryStyle,
    PromptConfig,
    build_prompt_ids,
    recent,
    system_message,
    user_message,
)
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.skills import SkillProvider, SkillSplicer, with_skill_prompts
from agentcredit.train.prefix_tree import layout_trees
from agentcredit.train.step_tensors import tensorize_steps
from agentcredit.train.tree_training import train_trees

#: the most wrong actions in a row a recovery sample's history ends with (``demonstration_steps``).
RECOVERY_MAX_TRIES = 3


@dataclass
class Demonstration:
    """One expert episode: per step, the observation and admissible actions seen, and the action."""

    task: Task
    observations: list[str]
    admissible: list[tuple[str, ...]]
    actions: list[str]
    won: bool
    invalid_observation: str | None = None
    """What the environment answers to an inadmissible action (``Nothing happens.``)."""
    labels: list[str] | None = None
    """The expert's action at each step, where it differs from the one played (noisy
    demonstrations: the sample's target, while ``actions`` make its history); None: the
    actions themselves."""

    def targets(self) -> list[str]:
        """The action each step is trained to produce."""
        return self.labels if self.labels is not None else self.actions


def expert_demonstrations(env: Environment, tasks: Sequence[Task], *, copies: int = 1,
                          noise: float = 0.0, seed: int = 0) -> list[Demonstration]:
    """Replay the expert of every task and record what the agent saw before each action.

    The expert is ``env.demonstration(task)`` when the environment has one (ALFWorld:
    a search that uses only what the agent observes, which a policy can imitate),
    else ``env.expert(task)`` (the planner's full-state plan).

    ``copies`` > 1 or ``noise`` > 0 need an environment with ``labelled_demonstration``
    (ALFWorld): each task is then played ``copies`` times with random tie-breaks and
    a random command instead of the expert's with probability ``noise`` per step, the
    expert's choice kept as the step's label (``Demonstration.labels``); the draws are
    seeded by ``seed``, the task id and the copy.
    """
    labelled = copies > 1 or noise > 0
    if labelled and not hasattr(env, "labelled_demonstration"):
        raise ValueError(f"{type(env).__name__} has no labelled_demonstration: sft.demonstration"
                         f" copies={copies} and noise={noise} need 1 and 0.0 for it")
    expert = getattr(env, "demonstration", env.expert)
    demos = []
    for task, copy in ((task, copy) for task in tasks for copy in range(copies)):
        labels = None
        if labelled:
            rng = random.Random(f"{seed}/{task.task_id}/{copy}")
            plan, labels = env.labelled_demonstration(task, rng, noise)
        else:
            plan = expert(task)
        env.reset(task)
        # an inadmissible action leaves the state unchanged (envs.base): ask for its answer
        invalid_observation = env.step("")[0].text
        obs = env.reset(task)
        observations, admissible, actions, won = [], [], [], False
        for action in plan:
            observations.append(obs.text)
            admissible.append(obs.admissible_actions)
            actions.append(action)
            obs, _, done, info = env.step(action)
            won = info.won
            if done:
                break
        demos.append(Demonstration(task, observations, admissible, actions, won,
                                   invalid_observation,
                                   labels[:len(actions)] if labels is not None else None))
    return demos


def demonstration_texts(demos: Sequence[Demonstration], action_format: str,
                        history_style: HistoryStyle = "pairs") -> Iterator[str]:
    """The texts the agent reads and writes in the demonstrations (the tokenizer's corpus).

    Each step's user turn is rendered in the prompts' ``history_style`` with the last
    ``LAYOUT_WINDOW[history_style]`` steps: every line kind of the layout occurs, and
    each observation and action is counted about as often as a prompt shows it, not
    once per step of a long window.
    """
    yield system_message(action_format)
    window = LAYOUT_WINDOW[history_style]
    for demo in demos:
        history: list[tuple[str, str]] = []
        for obs, admissible, action, target in zip(demo.observations, demo.admissible,
                                                   demo.actions, demo.targets(), strict=True):
            yield user_message(demo.task.instruction, recent(history, window), obs, admissible,
                               history_style)
            yield format_action(target, action_format)
            history.append((obs, action))


def demonstration_steps(demos: Sequence[Demonstration], tokenizer, prompt: PromptConfig,
                        recovery: float = 0.0, seed: int = 0,
                        decoding: Decoding = "free") -> list[Trajectory]:
    """The demonstrations as trajectories of training samples (prompt ids + response ids).

    With ``decoding="admissible"`` each sample carries the allowed sets of its tokens
    (``rollout.admissible``; the trie of the step's admissible commands), so SFT,
    like every scoring pass, trains the distribution admissible decoding samples from.

    With ``recovery`` > 0, that fraction of steps gets a second sample in which the
    agent has just tried 1 to ``min(prompt.history_window + 1, RECOVERY_MAX_TRIES)``
    wrong actions in a row (other steps' actions, inadmissible here; the count is
    uniform): the history ends with them, the observation is the environment's
    answer to an inadmissible action, and the target is still the expert's action.
    A cloned policy otherwise never sees the state after its own mistakes and,
    after one invalid action, keeps producing invalid ones; with several in a row
    a short window holds nothing but failed attempts, and only the task and the
    admissible actions say what to do. The cap keeps a long (``compact``) window's
    samples near what a policy meets, not mostly streaks of a dozen failures. The
    samples are rendered like every prompt, by ``build_prompt_ids``.
    """
    eos = tokenizer.eos_token_id
    rng = random.Random(seed)
    out = []
    for group, demo in enumerate(demos):
        traj = Trajectory(task=demo.task, group_id=group, won=demo.won)
        history: list[tuple[str, str]] = []
        for obs, admissible, played, action in zip(demo.observations, demo.admissible,
                                                   demo.actions, demo.targets(), strict=True):
            response = format_action(action, prompt.action_format)
            response_ids = tokenizer.encode(response, add_special_tokens=False) + [eos]
            allowed_ids = None
            if decoding == "admissible" and action in admissible:
                allowed_ids = ActionTrie.from_commands(
                    tokenizer, admissible, prompt.action_format).allowed_along(response_ids)
            contexts = [(history, obs)]
            wrong = [a for a in demo.actions if a not in admissible]
            if wrong and demo.invalid_observation is not None and rng.random() < recovery:
                count = rng.randint(1, min(prompt.history_window + 1, RECOVERY_MAX_TRIES))
                tries = [rng.choice(wrong) for _ in range(count)]
                seen_before = [obs] + [demo.invalid_observation] * (len(tries) - 1)
                contexts.append((history + list(zip(seen_before, tries, strict=True)),
                                 demo.invalid_observation))
            for past, seen in contexts:
                traj.steps.append(Step(
                    observation=seen, response=response, action=action, valid=True, reward=0.0,
                    anchor_key=seen, snapshot={},
                    prompt_ids=build_prompt_ids(tokenizer, demo.task.instruction, past, seen,
                                                admissible, prompt),
                    response_ids=response_ids, sampling_logprobs=[0.0] * len(response_ids),
                    allowed_ids=allowed_ids,
                ))
            history.append((obs, played))
        if traj.steps:
            out.append(traj)
    return out


def with_skill_demonstrations(samples: Sequence[Trajectory], share: float,
                              provider: SkillProvider, splicer: SkillSplicer,
                              seed: int) -> list[Trajectory]:
    """``samples`` plus skill-prefixed copies of ``round(share · len(samples))`` of them.

    The copied demonstrations are drawn with ``random.Random(seed)``; ``share = 0``
    returns the samples unchanged. See ``SFTConfig.skill_share`` for why and when.
    """
    count = round(share * len(samples))
    if count == 0:
        return list(samples)
    chosen = sorted(random.Random(seed).sample(range(len(samples)), count))
    return [*samples, *with_skill_prompts([samples[i] for i in chosen], provider, splicer)]


def run_sft(model, trajectories: Sequence[Trajectory], pad_id: int, config,
            generator: torch.Generator, progress=None, layout: str = "trees",
            gradient_checkpointing: bool = False) -> dict[str, float]:
    """Behaviour cloning: AdamW on the token-mean NLL of the response tokens of each batch,
    ``−(1/|V|) Σ_{t∈V} log π(y_t | y_<t)``, linear LR decay to 0.

    A batch holds whole demonstrations (``sft_batches``); under ``layout = "trees"``
    (``optim.layout``) its steps run as prefix trees (``train.prefix_tree``: every prompt
    token two steps share is computed once), under ``rows`` as rows sorted by length.

    Args:
        model: the policy, trained in place.
        trajectories: from ``demonstration_steps``.
        pad_id: the tokenizer's pad id.
        config: ``config.SFTConfig`` (epochs, lr, batch sizes, clip).
        generator: CPU generator for the demonstration order.
        progress: optional callable ``(step, num_steps, loss)`` after each optimiser step.
        layout: ``trees`` or ``rows`` (``optim.layout``); the same loss either way.
        gradient_checkpointing: recompute the decoder layers in the backward
            (``optim.gradient_checkpointing``); the same gradients, less activation memory.

    Returns:
        ``sft/steps``, ``sft/samples``, ``sft/first_loss``, ``sft/final_loss`` (mean
        over the last epoch's worth of batches), ``sft/seconds``.
    """
    start = time.perf_counter()
    data = tensorize_steps(trajectories, pad_id)
    batches, batches_per_epoch = sft_batches(data.step_rollout, config.batch_size,
                                             config.epochs, generator)
    num_steps = len(batches)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr,
                                  weight_decay=config.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / max(num_steps, 1))
    device = next(model.parameters()).device
    model.train()
    losses = []
    for step, rows in enumerate(batches):
        normalizer = data.loss_mask[rows].sum().clamp(min=1).to(torch.float32).to(device)

        def nll(logprobs, _entropy, members, normalizer=normalizer):
            mask = data.loss_mask[members, :logprobs.shape[1]].to(device)
            loss = -(logprobs * mask).sum() / normalizer
            return loss, {"loss": float(loss.detach())}

        parts = train_trees(model, layout_trees(model, data, layout, rows), data,
                            branch_batch=config.micro_batch_size, branch_loss=nll,
                            checkpointing=gradient_checkpointing)
        total = sum((part["loss"] for part in parts), 0.0)
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total)
        if progress is not None:
            progress(step + 1, num_steps, total)
    model.eval()
    tail = losses[-batches_per_epoch:] or [float("nan")]
    return {"sft/steps": float(num_steps), "sft/samples": float(data.input_ids.shape[0]),
            "sft/first_loss": losses[0] if losses else float("nan"),
            "sft/final_loss": sum(tail) / len(tail),
            "sft/seconds": time.perf_counter() - start}


def sft_batches(step_rollout: torch.Tensor, batch_size: int, epochs: float,
                generator: torch.Generator) -> tuple[list[torch.Tensor], int]:
    """The rows of every SFT optimiser step, and the number of batches in an epoch.

    An epoch shuffles the demonstrations with ``generator`` and cuts them, in that order,
    into ``B = ⌈S / batch_size⌉`` batches of whole demonstrations: demonstration ``d`` goes to
    batch ``⌊B · (rows before d) / S⌋``, so every batch holds about ``batch_size`` of the
    ``S`` steps (a demonstration longer than that fills a batch alone, and the batch it
    crowds out is dropped). ``epochs`` may be fractional: the last epoch stops part-way.

    Args:
        step_rollout: ``[S]`` int64, each step row's demonstration.
        batch_size: steps per optimiser step (``sft.batch_size``).
        epochs: passes over the steps (``sft.epochs``); 0 gives no batch.
        generator: the order's random stream.
    """
    total = step_rollout.shape[0]
    count = -(-total // batch_size)
    demos = torch.unique(step_rollout)
    sizes = torch.bincount(step_rollout)[demos]  # [D]
    batches: list[torch.Tensor] = []
    per_epoch = []
    for _ in range(math.ceil(epochs)):
        order = torch.randperm(len(demos), generator=generator)
        before = torch.cumsum(sizes[order], 0) - sizes[order]  # [D] rows before each
        share = before * count // total
        epoch = [torch.isin(step_rollout, demos[order[share == k]]).nonzero().flatten()
                 for k in range(count) if bool((share == k).any())]
        per_epoch.append(len(epoch))
        batches += epoch
    if not batches:
        return [], max(per_epoch, default=0)
    wanted = math.ceil(epochs / math.ceil(epochs) * len(batches))
    return batches[:wanted], per_epoch[0]
