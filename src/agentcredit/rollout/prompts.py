"""Build the policy's prompt for one step with the tokenizer's chat template.

Layout (one system and one user message, then the generation prompt)::

    system: <instructions: the role, the action format>
    user:   Your task is to: <instruction>
            Recent steps:                    (the last ``history_window`` pairs)
            Observation: <o_{t-k}>
            Action: <a_{t-k}>
            ...
            Current observation: <o_t>
            Admissible actions:
            <one per line>
    assistant: ▌

Only the last ``history_window`` (observation, action) pairs are shown, so a
prompt's length is bounded however long the episode runs. The same function
builds rollout prompts, SFT prompts and evaluation prompts, so the policy is
trained on exactly the text it is sampled from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentcredit.rollout.actions import FORMAT_INSTRUCTIONS, ActionFormat

SYSTEM_ROLE = "You are an agent acting in a text-based household environment."


@dataclass(frozen=True)
class PromptConfig:
    """How prompts are built.

    Attributes:
        history_window: number of past (observation, action) pairs shown, >= 0.
        action_format: ``bare`` or ``tagged`` (see ``rollout.actions``); picks the
            instruction in the system message.
        max_prompt_tokens: history pairs are dropped, oldest first, until the
            prompt fits (the current observation and the actions always stay).
    """

    history_window: int = 2
    action_format: ActionFormat = "bare"
    max_prompt_tokens: int = 1536


def system_message(action_format: ActionFormat) -> str:
    """The system message: the agent's role and the answer format."""
    return f"{SYSTEM_ROLE} {FORMAT_INSTRUCTIONS[action_format]}"


def user_message(
    instruction: str,
    history: Sequence[tuple[str, str]],
    observation: str,
    admissible_actions: Sequence[str],
) -> str:
    """The user turn: task, recent (observation, action) pairs, current observation, actions."""
    lines = [f"Your task is to: {instruction}"]
    if history:
        lines.append("Recent steps:")
        for past_observation, past_action in history:
            lines += [f"Observation: {past_observation}", f"Action: {past_action}"]
    lines += [f"Current observation: {observation}", "Admissible actions:"]
    lines += list(admissible_actions)
    return "\n".join(lines)


def build_messages(
    instruction: str,
    history: Sequence[tuple[str, str]],
    observation: str,
    admissible_actions: Sequence[str],
    config: PromptConfig,
) -> list[dict[str, str]]:
    """The chat messages for one step; ``history`` is every past pair, the window is applied
    here."""
    return [
        {"role": "system", "content": system_message(config.action_format)},
        {"role": "user", "content": user_message(instruction,
                                                 recent(history, config.history_window),
                                                 observation, admissible_actions)},
    ]


def recent(history: Sequence[tuple[str, str]], window: int) -> list[tuple[str, str]]:
    """The last ``window`` pairs of ``history`` (none when ``window`` is 0)."""
    return list(history)[max(0, len(history) - window):] if window > 0 else []


def build_prompt_ids(
    tokenizer,
    instruction: str,
    history: Sequence[tuple[str, str]],
    observation: str,
    admissible_actions: Sequence[str],
    config: PromptConfig,
) -> list[int]:
    """Token ids of the step's prompt, ending with the assistant generation prompt.

    Drops history pairs (oldest first) while the prompt is longer than
    ``config.max_prompt_tokens``.
    """
    window = recent(history, config.history_window)
    while True:
        messages = [
            {"role": "system", "content": system_message(config.action_format)},
            {"role": "user", "content": user_message(instruction, window, observation,
                                                     admissible_actions)},
        ]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                            return_dict=False)
        if len(ids) <= config.max_prompt_tokens or not window:
            return list(ids)
        window = window[1:]
