"""The run's config sections: one dataclass per section, a one-line doc per field.

A run is one ``TrainConfig`` with the sections ``run``, ``model``, ``sft``, ``rollout``,
``optim``, ``credit``, ``eval``, ``skills`` and ``env`` (``config.environment``). Every
section validates itself at construction (``schema.validate``), so a config built in Python is
checked like one loaded from YAML; what crosses sections is checked by ``config.checks``.

Dataclass defaults are the papers' (docs/backbones.md §1, docs/settings.md §6) where they exist;
the preset ``config/presets/embedded.yaml`` shrinks them for the laptop run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from agentcredit.config.environment import GAMES_MAX, EnvConfig
from agentcredit.config.schema import SEED_MAX, ConfigError, build, validate
from agentcredit.config.tiny_model import TinyModelConfig
from agentcredit.rollout.actions import ActionFormat

# Upper bounds shared by several keys (``config.schema``'s range rule: 10 to 100 times the
# largest value a run would sensibly use).
UPDATES_MAX = 1_000_000
"""RL updates, and every "every this many updates": the papers' runs are a few hundred."""
BATCH_MAX = 100_000
"""Rows of a batch, micro-batch or mini-batch count; the memory estimate judges what fits."""
TOKENS_MAX = 1 << 17
"""Tokens of a prompt or a response (131,072, the context of the longest-context open models;
the memory estimate judges what fits)."""
TEMPERATURE_MAX = 10.0
"""Sampling temperatures: at 10 the policy samples almost uniformly already."""
GRAD_CLIP_UNBOUNDED = ("a clip above the gradient's norm only turns clipping off (1e9 is the "
                       "usual way to say so), which costs nothing")
"""Why ``grad_clip`` has no upper bound (``config.schema``'s ``_unbounded``)."""


@dataclass
class RunConfig:
    """Where the run lives, how long it runs, how it is seeded."""

    name: str = "embedded"
    """Run directory name, created under ``output_dir``."""
    output_dir: str = "runs"
    """Parent folder of run directories."""
    seed: int = 0
    """Seed of every random stream (task sampling, sampling, SFT order, initialisation)."""
    updates: int = 100
    """Number of RL updates (collect → score → credit → PPO step)."""
    eval_every: int = 10
    """Evaluate every this many updates (and always after the last); 0 = only at start and end."""
    eval_at_start: bool = True
    """Evaluate before the first update (the RL starting success)."""
    checkpoint_every: int = 10
    """Checkpoint every this many updates (and always after the last)."""
    keep_checkpoints: int = 2
    """Most recent checkpoints kept on disk (at most 1,000); older ones are deleted."""
    device: str = "cpu"
    """Torch device of the policy and reference models (``cpu``, ``cuda``, ``cuda:1``)."""
    threads: int = 0
    """Torch CPU threads; 0 leaves torch's default. At most four times this machine's cores
    (at least 16), and never over 4,096."""
    progress: bool = True
    """Show progress on stderr for every long phase (game generation, demonstrations, SFT,
    evaluation, updates): a redrawn bar on a terminal, a few plain lines in a log."""
    save_rollouts: int = 0
    """Save every this many updates, and always the last, the update's rollouts with their credit
    (steps, per-step and per-token advantages, VICT proof edges and ledger rows, ADRS teacher
    scores) to ``rollouts/update_NNNNN.json.gz`` for the viewer of ``agentcredit report``;
    0 = off."""
    keep_rollouts: int = 10
    """Most recent saved updates kept in ``rollouts/``; older files are deleted (each file is
    gzip-compressed, its texts cut to 4,000 characters, ``run/saved_rollouts.py``)."""
    tensorboard: bool = False
    """Also write every metrics line as TensorBoard scalars to ``tensorboard/`` (needs
    ``pip install 'agentcredit[tensorboard]'``); ``metrics.jsonl`` stays the record."""
    wandb: str = ""
    """Also log every metrics line to this Weights & Biases project (needs ``pip install
    wandb``); empty = off. ``metrics.jsonl`` stays the record."""
    credit_check_every: int = 0
    """Every this many updates, score the update's step credit against the environment's solver
    truth (one seeded tie-break) and log ``credit_check/*`` (docs/credit_check.md); 0 = off.
    Needs an environment with a solver (ALFWorld)."""

    _limits: ClassVar[dict[str, tuple]] = {
        "seed": (0, SEED_MAX), "updates": (0, UPDATES_MAX), "eval_every": (0, UPDATES_MAX),
        "checkpoint_every": (1, UPDATES_MAX), "keep_checkpoints": (1, 1000),
        "threads": (0, 4096), "save_rollouts": (0, UPDATES_MAX), "keep_rollouts": (1, 10_000),
        "credit_check_every": (0, UPDATES_MAX)}

    def __post_init__(self) -> None:
        validate(self)
        if not self.name.strip() or self.name.strip() in (".", "..") or "/" in self.name:
            raise ConfigError(f"run.name = {self.name!r} must name one folder under "
                              "run.output_dir (for example run.name=my_run)")


@dataclass
class ModelConfig:
    """Which policy to train."""

    name: str = "embedded"
    """``embedded`` bootstraps the tiny model on environment text; else a hub id or a local
    checkpoint directory."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Compute dtype of the forwards (sampling, scoring, PPO, SFT). ``bfloat16`` runs them under
    bfloat16 autocast while the trained policy's weights, gradients and AdamW state stay
    float32 (mixed precision: an optimiser over bfloat16 weights loses updates far below
    bfloat16's spacing); frozen copies (the reference) are held in bfloat16. ``float16``
    loads any model for ``eval`` only: training in it needs a loss scaler, which the trainer
    does not run. The embedded tiny model and CPU runs keep ``float32``."""
    fp32_lm_head: bool = False
    """Run the LM head in float32 under ``dtype=bfloat16``: logits (and so every log-prob the
    scoring passes and the PPO ratio read) are computed from float32 weights instead of
    being rounded to bfloat16 first. Costs the head's float32 matmul; no effect in float32."""
    tokenizer_games_per_type: int = 0
    """Train games per task type whose expert replays train the embedded tokenizer; 0 = all train
    games."""
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    """Size and seed of the embedded tiny model (ignored for other models)."""

    _limits: ClassVar[dict[str, tuple]] = {"tokenizer_games_per_type": (0, GAMES_MAX)}

    def __post_init__(self) -> None:
        validate(self)


@dataclass
class SFTConfig:
    """Behaviour cloning on expert trajectories of the train split (the warm start)."""

    enabled: bool = True
    """Run the SFT warm start before RL (skipped when resuming)."""
    epochs: float = 3.0
    """Passes over the expert steps; fractional values stop part-way. At most 100: more passes
    over the same steps only overfit."""
    lr: float = 1e-3
    """AdamW learning rate."""
    batch_size: int = 32
    """Expert steps per optimiser step."""
    micro_batch_size: int = 16
    """Steps per forward/backward (gradient accumulation inside a batch)."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Global gradient-norm clip."""
    recovery: float = 0.0
    """Fraction of expert steps also trained from just after a wrong, inadmissible action
    (``sft.demonstration_steps``)."""
    skill_share: float = 0.0
    """Share of demonstrations also trained as a copy with the task's skill prefix in every prompt
    (``skills.with_skill_prompts``). Only for the embedded tiny model, which has
    never seen skill text: this teaches it to tolerate and read the prefix so ADRS's teacher
    branch is a working policy; it cannot teach procedures the expert never needed, so expect a
    small ``eval/probe_gap``. Real instruction-tuned checkpoints need no such step (keep 0).
    Set it alike for every method of a comparison: it changes the shared SFT start."""
    demonstrations_per_task: int = 1
    """Demonstrations played per train task, at most 100 (a handful is the useful range).
    Above 1 (or with ``demonstration_noise``) each is played with random tie-breaks between
    equally good receptacles and its own seed (``sft.expert_demonstrations``). ALFWorld only:
    other environments play one clean demonstration per task, and the warm start says so."""
    demonstration_noise: float = 0.0
    """Probability per demonstration step that a random admissible command is played instead of
    the expert's, which stays that step's training target; the expert then recovers from where
    the command led, so SFT sees the states a cloned policy's own mistakes lead to
    (``envs.alfworld.expert.noisy_demonstration``). ALFWorld only, as
    ``demonstrations_per_task``."""
    cache: bool = True
    """Reuse the embedded model's start (the bootstrapped tokenizer and model after SFT) from
    ``cache_dir`` when everything that determines it is the same: the train games, the
    demonstrations, the model and tokenizer settings, the prompt, these SFT settings, the seed
    and the package's code (``train.warm_start.start_cache``); a line on stderr says what was
    reused. ``false`` trains it again (and stores nothing). A named checkpoint's SFT always
    runs."""
    cache_dir: str = ".cache/agentcredit/starts"
    """Where cached starts are kept, one folder per key (shared between runs)."""

    _limits: ClassVar[dict[str, tuple]] = {
        "epochs": (0.0, 100.0), "lr": (0.0, 1.0), "batch_size": (1, BATCH_MAX),
        "micro_batch_size": (1, BATCH_MAX), "weight_decay": (0.0, 10.0),
        "grad_clip": (0.0, None), "recovery": (0.0, 1.0), "skill_share": (0.0, 1.0),
        "demonstrations_per_task": (1, 100), "demonstration_noise": (0.0, 1.0)}
    _unbounded: ClassVar[dict[str, str]] = {"grad_clip": GRAD_CLIP_UNBOUNDED}

    def __post_init__(self) -> None:
        validate(self)


@dataclass
class RolloutConfig:
    """How rollouts are collected (docs/backbones.md §0, 2, 6)."""

    group_size: int = 8
    """``N``, rollouts per task; they form one group (docs/settings.md §6: 8)."""
    tasks_per_update: int = 16
    """Task groups collected per update (docs/settings.md §6: 16)."""
    max_steps: int = 50
    """Step limit per episode (docs/settings.md §6: ALFWorld 50)."""
    temperature: float = 1.0
    """Sampling temperature ``T`` of training rollouts (docs/settings.md §6: 1.0). The policy
    PPO trains is the one that samples, ``softmax(z / T)``: every scoring pass (old log-probs,
    the reference, the teacher, hindsight, the probes) and the update divide the logits by
    ``T``, as verl does with its rollout temperature (``policy_temperature``)."""
    max_new_tokens: int = 24
    """Response length limit per step."""
    history_window: int = 2
    """Past steps shown in the prompt (0 = none; at most 1,000, far past any step limit a
    prompt could hold)."""
    history_style: Literal["pairs", "compact"] = "pairs"
    """How past steps are shown: ``pairs`` (``Observation:``/``Action:`` lines) or ``compact``
    (one ``> action | what followed`` line per step; with a long window, the memory of what
    the agent did and saw, ``rollout/prompts.py``)."""
    action_format: ActionFormat = "bare"
    """``bare``: the response is the action (tiny model); ``tagged``: ``<think>`` + ``<action>``
    (LLMs); ``raw``: the whole response goes to the environment, which reads its own format
    and decides validity (Search-R1's reasoning then ``<search>``/``<answer>``, env=searchqa)."""
    max_prompt_tokens: int = 1536
    """Prompt length cap; the oldest history pairs are dropped to fit."""
    invalid_penalty: float = -0.1
    """Reward at a step whose action is unparsable or not admissible
    (docs/backbones.md §2: −0.1); −100 to 0."""
    outcome_reward: float = 10.0
    """Scale of the outcome reward at an episode's last step (docs/backbones.md §2: 10·1[won]);
    0 to 1,000."""
    outcome_signal: Literal["won", "score"] = "won"
    """What the scale multiplies: ``won`` (1[success]) or ``score`` (the environment's final
    reward in [0, 1]; docs/backbones.md §2's normalised WebShop score for VICT-style runs)."""
    record_snapshots: bool = True
    """Store the environment state snapshot after every step (VICT reads it)."""
    generation_batch_size: int = 64
    """Prompts sampled in one batched forward pass."""
    reuse_prompt_cache: bool = False
    """Keep the keys and values of each step's prompts until the next step, whose prompts then
    prefill only the tokens after the prefix they share with one of them (the history grows
    at the end, so most of a prompt is its previous step's). Same samples as a full prefill,
    to float rounding. It holds one step's caches of every running rollout (a 7B Qwen2.5 in
    bf16: 57 KB per prompt token, 86 MB for a 1,500-token prompt), so it is off by default and
    on in the embedded default, where prefill is most of a CPU rollout's time. Models with
    sliding-window layers always prefill the whole prompt."""
    decoding: Literal["free", "admissible"] = "free"
    """``free``: the response is any text and an inadmissible one pays ``invalid_penalty`` (the
    papers' setting, the default for Hugging Face checkpoints); ``admissible``: each token is
    sampled among the continuations of the state's admissible commands (a token trie,
    ``rollout/admissible.py``), so every action is valid, and every pass that scores the tokens
    renormalises the same way. The embedded default uses ``admissible``, a departure from the
    papers (README)."""
    skills: bool = False
    """Show the task's skill text in training rollout prompts (the ``skill_grpo`` and
    ``skill_grpo*`` baselines, docs/adrs.md §5.6); the prefix comes on top of
    ``max_prompt_tokens``."""
    overlong_buffer: float = 0.0
    """DAPO's soft overlong penalty (``credit/overlong.py``, on both paths): the last
    ``overlong_buffer`` share of ``max_new_tokens`` is a buffer in which a step's reward falls
    linearly to ``−overlong_penalty`` at the limit; 0 = off (``method=dapo``: 0.2, DAPO's
    4096/20480)."""
    overlong_penalty: float = 0.1
    """Largest overlong penalty, reached by a response the ``max_new_tokens`` limit cut off."""
    dynamic_sampling_rounds: int = 0
    """DAPO dynamic sampling (``train/batch_source.py``): drop task groups whose rollouts all
    have the same return and collect new tasks in their place, for at most this many extra
    rounds per update; 0 = off (``method=dapo``: 3; at most 100). ``agentcredit train`` only:
    the verl path refuses it."""

    _limits: ClassVar[dict[str, tuple]] = {
        "group_size": (1, 1024), "tasks_per_update": (1, 10_000), "max_steps": (1, 10_000),
        "temperature": (0.0, TEMPERATURE_MAX), "max_new_tokens": (1, TOKENS_MAX),
        "history_window": (0, 1000), "max_prompt_tokens": (16, TOKENS_MAX),
        "invalid_penalty": (-100.0, 0.0), "outcome_reward": (0.0, 1000.0),
        "generation_batch_size": (1, BATCH_MAX), "overlong_buffer": (0.0, 1.0),
        "overlong_penalty": (0.0, 100.0), "dynamic_sampling_rounds": (0, 100)}

    def __post_init__(self) -> None:
        validate(self)
        if self.decoding == "admissible" and self.action_format == "raw":
            raise ConfigError("RolloutConfig.decoding = 'admissible' samples exactly one suggested "
                              "action, leaving no room for the reasoning rollout.action_format = "
                              "raw asks for; set rollout.decoding=free (or "
                              "rollout.action_format=bare to pick among the suggested actions)")

    @property
    def policy_temperature(self) -> float:
        """The ``T`` every scoring pass and the update apply: ``temperature``, or 1 for greedy
        rollouts (``temperature = 0``), whose recorded log-probs are untempered."""
        return self.temperature or 1.0


@dataclass
class OptimConfig:
    """The PPO update (docs/backbones.md §1)."""

    lr: float = 1e-6
    """AdamW learning rate (docs/backbones.md §1: 1e-6 for real checkpoints; the tiny model needs
    more)."""
    weight_decay: float = 0.01
    """AdamW weight decay (docs/backbones.md §1: 0.01)."""
    grad_clip: float = 1.0
    """Global gradient-norm clip (docs/backbones.md §1: 1.0)."""
    clip_low: float = 0.2
    """``ε_lo``: the ratio is clipped below at ``1 − ε_lo`` (docs/backbones.md §1: 0.2)."""
    clip_high: float = 0.2
    """``ε_hi``: the ratio is clipped above at ``1 + ε_hi``
    (docs/backbones.md §1: 0.2; ADRS 0.28)."""
    kl_coef: float = 0.01
    """``β_KL``, weight of the k3 KL to the frozen reference (docs/backbones.md §1: 0.01);
    0 loads no reference."""
    mini_batches: int = 1
    """Optimiser steps per update, one epoch: the rollouts are shuffled and split evenly under
    ``layout=trees`` (a rollout's prefix tree is never split), the steps under ``layout=rows``
    and on a model that runs as rows."""
    micro_batch_size: int = 8
    """Step samples per forward/backward pass (gradient accumulation); under
    ``layout=trees`` the branches of one prefix tree per forward."""
    score_micro_batch_size: int = 16
    """Step samples per forward pass when scoring old, reference and ADRS teacher log-probs
    (branches per forward under ``layout=trees``)."""
    layout: Literal["trees", "rows"] = "trees"
    """How step rows are computed in PPO and the scoring passes (docs/backbones.md §0.1):
    ``trees`` runs each trajectory's rows as prefix trees, every shared prompt token once,
    with mini-batches of whole rollouts; ``rows`` runs every row's whole prompt, with
    mini-batches of shuffled rows. The same log-probs either way (to float rounding); models
    with sliding-window layers or an attention other than ``sdpa`` / ``eager`` run as rows."""
    aux_loss: str = "none"
    """Auxiliary loss added to the PPO loss, by name in ``credit.aux_losses`` (docs/adrs.md §5.6):
    ``opsd`` pulls the policy toward the privileged teacher ``ℓ^T`` on sampled tokens;
    ``sdar`` gates each token by ``sigmoid(τ(ℓ^T − ℓ^b))``; ``skill_sd`` adds Skill-SD's
    importance-weighted k3 estimate of ``KL(π_θ ‖ π_T)``; ``none`` adds nothing."""
    aux_coef: float = 0.01
    """``β``, the weight of ``aux_loss`` (docs/adrs.md §5.6: the ADRS authors' 0.01 for OPSD and
    SDAR; ``method=skill_sd`` sets their 0.1)."""
    pg_coef: float = 1.0
    """Weight of the clipped policy-gradient term; 0 trains on the auxiliary loss alone
    (``method=opsd_only``, docs/adrs.md §5.6)."""
    entropy_coef: float = 0.0
    """Entropy bonus ``−c_H · mean_V H`` added to the loss (the ADRS paper's entropy ablation,
    docs/adrs.md §5.4); 0 = off."""
    loss_agg: Literal["token_mean", "rollout_mean"] = "token_mean"
    """How the loss weighs the batch's tokens (docs/backbones.md §1): ``token_mean`` (every
    response token alike, so a 30-step failed rollout outweighs a 6-step win five to one) or
    ``rollout_mean`` (every rollout's tokens together weigh as much as any other rollout's:
    each token's advantage is scaled by the batch's mean tokens per rollout over its own
    rollout's). [choice] Only the policy-gradient term is reweighted: the KL, entropy and
    auxiliary terms pull every token toward a reference or a teacher whatever its rollout's
    length, so they stay token means. The embedded trainer's setting; a verl run aggregates
    with verl's own ``actor.loss_agg_mode`` (the launch refuses ``rollout_mean``)."""
    gradient_checkpointing: bool = False
    """Keep only each decoder layer's input during the PPO and SFT forwards and recompute the
    layer in backward: activation memory falls from every layer's intermediates to one
    layer's, for about a third more compute in the update. The same gradients
    (docs/backbones.md §0.1); on in the ``hf`` preset."""
    recompute_old_logprobs: bool = True
    """Score the batch again before the update for PPO's old log-probs ``ℓ^b``; ``false`` takes
    the log-probs recorded at sampling and saves one forward pass over the batch. In float32
    they are the same numbers (the sampler and every scoring pass apply
    ``rollout.temperature``; agreement to 1e-5 is tested); under ``model.dtype=bfloat16`` only
    to bfloat16's precision (docs/backbones.md §1.1), so keep ``true`` there: the ratio then
    starts at exactly 1."""

    _limits: ClassVar[dict[str, tuple]] = {
        "lr": (0.0, 1.0), "weight_decay": (0.0, 10.0), "grad_clip": (0.0, None),
        "clip_low": (0.0, 0.999), "clip_high": (0.0, 10.0), "kl_coef": (0.0, 100.0),
        "mini_batches": (1, BATCH_MAX), "micro_batch_size": (1, BATCH_MAX),
        "score_micro_batch_size": (1, BATCH_MAX), "aux_coef": (0.0, 100.0),
        "pg_coef": (0.0, 100.0), "entropy_coef": (0.0, 100.0)}
    _unbounded: ClassVar[dict[str, str]] = {"grad_clip": GRAD_CLIP_UNBOUNDED}

    def __post_init__(self) -> None:
        validate(self)


@dataclass
class CreditConfig:
    """Which advantage estimator turns rewards into per-step advantages (docs/backbones.md §3)."""

    estimator: str = "grpo"
    """Name in the credit registry (``grpo``, ``rloo``, ``gigpo``, ``vict``, ``adrs``, …);
    ``adrs`` adds the privileged teacher pass (docs/adrs.md §5) and trains on its token
    advantages."""
    options: dict[str, Any] = field(default_factory=dict)
    """Fields of the estimator's config dataclass (``credit.options.mode=mean_norm``);
    unset = defaults."""

    def __post_init__(self) -> None:
        validate(self)


@dataclass
class EvalConfig:
    """Evaluation on ``valid_seen`` and ``valid_unseen``."""

    temperature: float = 0.4
    """Sampling temperature at evaluation (docs/settings.md §6: 0.4)."""
    skills: bool = False
    """Show the task's skill text in evaluation prompts (the ``skill_prompt`` and
    ``skill_grpo*`` baselines, docs/adrs.md §5.6); every other method is evaluated without
    skills."""
    probes: int = 4
    """Runs that use skills log the ADRS token gap ``eval/probe_gap/{action,object,other}``
    (mean ``ℓ^T − ℓ^b``, docs/adrs.md §5.5) at every evaluation on this many fixed probe
    trajectories: the expert demonstrations of the first task of each task type of the first
    validation split (so at most one per task type are played); 0 = off, at most 1,000."""
    splits: list[str] = field(default_factory=list)
    """Splits evaluated (empty: the environment's own validation splits, ALFWorld
    ``valid_seen`` and ``valid_unseen``, WebShop ``valid``, and ``pool`` when there is an RL
    pool); success is reported per split, overall and per task type."""
    episodes_per_game: int = 1
    """Episodes played on each validation game (1 to 9); success is the mean over all of
    them. At 20 % success one episode per game of 108 reads with a standard deviation of
    3.8 points, four read with about 1.9 (fewer when games differ in difficulty)."""

    pool_episodes_per_game: int = 4
    """Episodes played on each game of the ``pool`` split (1 to 9), the RL pool's games
    (``env.pool_games_per_type``): a pool is small, so each game is played several times and
    its outcome is its share won."""
    held_out: Literal["every", "ends"] = "every"
    """When the pool is evaluated, when the other splits are too: ``every`` evaluation, or only
    at the ``ends`` (the first and the last evaluation; the pool curve's points between them
    then cost a pool evaluation only)."""

    _limits: ClassVar[dict[str, tuple]] = {"temperature": (0.0, TEMPERATURE_MAX),
                                           "probes": (0, 1000), "episodes_per_game": (1, 9),
                                           "pool_episodes_per_game": (1, 9)}

    def __post_init__(self) -> None:
        validate(self)


@dataclass
class SkillsConfig:
    """The privileged skill texts of ADRS and its baselines (docs/adrs.md §5.1, ``skills/``)."""

    root: str = ""
    """Folder with ``<env>/guide.md`` and one ``<env>/<task_type>.md`` per task type; empty =
    the packaged texts (ALFWorld, WebShop). The embedded tokenizer is also fitted on them."""

    def __post_init__(self) -> None:
        validate(self)



@dataclass
class TrainConfig:
    """One training run: every section above."""

    run: RunConfig = field(default_factory=RunConfig)
    """Run directory, length, seeding, device."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The policy model."""
    sft: SFTConfig = field(default_factory=SFTConfig)
    """The SFT warm start."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Rollout collection."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """The PPO update."""
    credit: CreditConfig = field(default_factory=CreditConfig)
    """The advantage estimator."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation."""
    skills: SkillsConfig = field(default_factory=SkillsConfig)
    """Privileged skill texts (ADRS and its baselines)."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Environment and tasks."""

    @property
    def run_dir(self) -> Path:
        """``output_dir / name``."""
        return Path(self.run.output_dir) / self.run.name

    @property
    def inputs(self) -> frozenset[str]:
        """What the trainer prepares each update for the estimator and the auxiliary loss
        (``credit.registry.INPUTS``: ``traces``, ``teacher``, ``reference``, ``hindsight``)."""
        from agentcredit.credit import get_estimator
        from agentcredit.credit.aux_losses import get_aux_loss

        needs = get_estimator(self.credit.estimator).inputs(estimator_config(self.credit))
        if self.optim.aux_loss != "none":
            needs |= get_aux_loss(self.optim.aux_loss).needs
        return needs

    @property
    def uses_teacher(self) -> bool:
        """Whether updates run the privileged teacher pass ``ℓ^T``."""
        return "teacher" in self.inputs

    @property
    def uses_skills(self) -> bool:
        """Whether any part of the run reads skill texts (then they must exist for every task)."""
        return (self.uses_teacher or self.rollout.skills or self.eval.skills
                or self.sft.skill_share > 0)



def estimator_config(credit: CreditConfig) -> Any:
    """The estimator's config dataclass built from ``credit.options``."""
    from agentcredit.credit import get_estimator

    return build(get_estimator(credit.estimator).config_cls, credit.options, "credit.options.")

