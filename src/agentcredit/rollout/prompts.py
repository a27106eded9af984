"""Build the policy's prompt for one step with the tokenizer's chat template.

Layout (one system and one user message, then the generation prompt)::

    system: <instructions: the role, the action format>
    user:   Your task is to: <instruction>
            <history, in the config's ``history_style``; absent when there is none>
            Current observation: <o_t>
            Admissible actions:
            <one per line>
    assistant: ▌

``history`` is every past step as ``(o_i, a_i)``: the observation the agent saw
and the action it then took. The last ``history_window`` of them are shown, in
one of two styles:

``pairs`` (two lines per step; each observation is the one *before* the action)::

    Recent steps:
    Observation: <o_{t-k}>
    Action: <a_{t-k}>
    ...

``compact`` (one line per step; each action with the observation that *followed*
it, ``o_{i+1}``, flattened to one line)::

    Your past actions and what followed:
    > <a_{t-k}> | <o_{t-k+1}>
    ...
    > <a_{t-1}>

In ``compact`` each admissible action already in the shown history is marked
``(done before)``, and the ``Your task is to:`` line moves to the end of the
user turn, after the admissible actions, next to the answer. No observation is
shown twice: the last action's result is the current observation, and
``o_{t-k}`` (at the start of an episode, the long room description) is dropped
with the step before it. One line per step makes a long window cheap, so the
policy can remember which receptacles it already searched and where it saw an
object, as the ALFWorld demonstrator it is cloned from does
(``envs.alfworld.expert``).

Steps are dropped, oldest first, until the prompt fits ``max_prompt_tokens``,
so a prompt's length is bounded however long the episode runs. The same
function builds rollout prompts, SFT prompts and evaluation prompts, so the
policy is trained on exactly the text it is sampled from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from agentcredit.rollout.actions import FORMAT_INSTRUCTIONS, ActionFormat

SYSTEM_ROLE = "You are an agent acting in a text-based environment."

HistoryStyle = Literal["pairs", "compact"]


@dataclass(frozen=True)
class PromptConfig:
    """How prompts are built.

    Attributes:
        history_window: number of past steps shown, >= 0 (0: none).
        action_format: ``bare``, ``tagged`` or ``raw`` (see ``rollout.actions``); picks the
            instruction in the system message.
        max_prompt_tokens: past steps are dropped, oldest first, until the prompt
            fits (the current observation and the actions always stay).
        history_style: ``pairs`` (an ``Observation:`` and an ``Action:`` line per
            step) or ``compact`` (one ``> action | what followed`` line per step,
            cheap enough for a window of ~30 steps).
    """

    history_window: int = 2
    action_format: ActionFormat = "bare"
    max_prompt_tokens: int = 1536
    history_style: HistoryStyle = "pairs"

    def __post_init__(self) -> None:
        if self.history_style not in get_args(HistoryStyle):
            raise ValueError(f"PromptConfig.history_style = {self.history_style!r}; "
                             f"use one of {', '.join(get_args(HistoryStyle))}")


#: the fewest past steps whose rendering holds every kind of history line of a style
#: (``compact``: a line with its result and the last, bare action); the tokenizer
#: corpus (``train.warm_start.sft.demonstration_texts``) renders this many.
LAYOUT_WINDOW: dict[str, int] = {"pairs": 1, "compact": 2}


def system_message(action_format: ActionFormat) -> str:
    """The system message: the agent's role and the answer format."""
    return f"{SYSTEM_ROLE} {FORMAT_INSTRUCTIONS[action_format]}"


def history_lines(history: Sequence[tuple[str, str]], style: HistoryStyle) -> list[str]:
    """The user turn's lines for the shown past steps ``history`` (no lines when it is empty)."""
    if not history:
        return []
    if style == "pairs":
        lines = ["Recent steps:"]
        for past_observation, past_action in history:
            lines += [f"Observation: {past_observation}", f"Action: {past_action}"]
        return lines
    lines = ["Your past actions and what followed:"]
    followed = [observation for observation, _ in history[1:]]
    for (_, past_action), result in zip(history[:-1], followed, strict=True):
        lines.append(f"> {past_action} | {' '.join(result.split())}")
    return [*lines, f"> {history[-1][1]}"]


def user_message(
    instruction: str,
    history: Sequence[tuple[str, str]],
    observation: str,
    admissible_actions: Sequence[str],
    history_style: HistoryStyle = "pairs",
) -> str:
    """The user turn: task, the shown past steps, current observation, actions.

    In the ``compact`` style the task comes last, right before the answer: a small
    model then reads the goal next to the choice it must ground in it (which object
    to take), not hundreds of tokens back. And each admissible action the shown
    history already holds is marked ``(done before)``, next to the choice, so
    "which receptacles have I searched" is read off the list, not matched against
    the history line by line.
    """
    task = f"Your task is to: {instruction}"
    if history_style == "compact":
        taken = {action for _, action in history}
        admissible_actions = [f"{a} (done before)" if a in taken else a
                              for a in admissible_actions]
    lines = [*history_lines(history, history_style), f"Current observation: {observation}",
             "Admissible actions:", *admissible_actions]
    return "\n".join([*lines, task] if history_style == "compact" else [task, *lines])


def build_messages(
    instruction: str,
    history: Sequence[tuple[str, str]],
    observation: str,
    admissible_actions: Sequence[str],
    config: PromptConfig,
) -> list[dict[str, str]]:
    """The chat messages for one step; ``history`` is every past step, the window is applied
    here."""
    return [
        {"role": "system", "content": system_message(config.action_format)},
        {"role": "user", "content": user_message(instruction,
                                                 recent(history, config.history_window),
                                                 observation, admissible_actions,
                                                 config.history_style)},
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

    Drops past steps (oldest first; in ``compact`` style, the oldest line) while
    the prompt is longer than ``config.max_prompt_tokens``.
    """
    window = recent(history, config.history_window)
    while True:
        messages = build_messages(instruction, window, observation, admissible_actions, config)
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                            return_dict=False)
        if len(ids) <= config.max_prompt_tokens or not window:
            return list(ids)
        window = window[1:]
