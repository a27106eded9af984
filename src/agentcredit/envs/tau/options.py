"""The tau environments' settings (``env.tau`` in a run config): which tasks, which user,
which judge.

Plain dataclasses with no import of the domain packages, so a config loads
without the ``agentcredit[tau]`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from agentcredit.config.schema import refuse_long_backoff, validate


@dataclass(frozen=True)
class EndpointConfig:
    """An OpenAI-compatible chat-completions endpoint (vLLM, SGLang, llama.cpp, OpenAI …)."""

    base_url: str = ""
    """URL up to ``/v1`` (``http://localhost:8000/v1``, parsed at load); empty = no
    endpoint."""
    model: str = ""
    """Model name sent with each request."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (none needed when it is unset)."""
    temperature: float = 0.0
    """Sampling temperature (tau2's user simulator samples at 0); at most 10."""
    timeout_s: float = 60.0
    """Seconds a whole request may take (connecting to the last byte) before it counts as
    failed; more than 0, at most 3600."""
    retries: int = 4
    """Retries of a failed request before giving up on it; at most 20, and the back-off
    they plan (``backoff_s`` x (2^retries - 1)) at most ``config.schema.MAX_BACKOFF_S`` (an
    hour)."""
    backoff_s: float = 1.0
    """Wait before the first retry; doubled at each further retry; at most 60."""

    _limits: ClassVar[dict[str, tuple]] = {"temperature": (0.0, 10.0),
                                           "timeout_s": (0.0, 3600.0, "open"),
                                           "retries": (0, 20), "backoff_s": (0.0, 60.0)}
    _urls: ClassVar[tuple[str, ...]] = ("base_url",)

    def __post_init__(self) -> None:
        validate(self)
        refuse_long_backoff("EndpointConfig", self.retries, self.backoff_s)


@dataclass(frozen=True)
class TauConfig:
    """tau2-bench retail and airline (``env=tau-retail`` or ``env=tau-airline``)."""

    instruction: Literal["policy", "brief"] = "policy"
    """What the agent is told each step: ``policy`` = the action format and the domain policy
    (tau2's agent prompt), ``brief`` = the action format only (a tiny model's prompt budget)."""
    max_tasks: int = 0
    """Use only the first this many tasks of each split; 0 = all (at most 100,000; a tau2
    domain has a few hundred)."""
    observation_chars: int = 0
    """Cut longer observations to this many characters, marked ``…``; 0 = never (tau2), at
    most 1,000,000. For small models' context; the reward and snapshot never read the
    observation."""
    max_errors: int = 10
    """End the episode, with reward 0, after this many tool errors (tau2's ``max_errors``: 10);
    at most 1,000."""
    user: Literal["scripted", "llm"] = "scripted"
    """Who plays the customer: ``scripted`` answers from the task's known information
    (deterministic, for tests and the expert); ``llm`` is tau2's LLM user simulator on
    ``user_endpoint``."""
    patience: int = 8
    """Scripted user: replies after which it ends the conversation; at most 1,000."""
    user_endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    """LLM user: the chat endpoint and model."""
    user_guidelines_file: str = ""
    """LLM user: a file with the user simulator's guidelines (tau2's
    ``simulation_guidelines.md``); empty = the guidelines shipped here."""
    judge_endpoint: EndpointConfig = field(default_factory=EndpointConfig)
    """Judge of NL assertions; without a ``base_url`` they are skipped and the skip reported."""

    _limits: ClassVar[dict[str, tuple]] = {"max_tasks": (0, 100_000),
                                           "observation_chars": (0, 1_000_000),
                                           "max_errors": (1, 1000), "patience": (1, 1000)}

    def __post_init__(self) -> None:
        validate(self)
