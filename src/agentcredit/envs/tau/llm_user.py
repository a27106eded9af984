"""tau2's LLM user simulator over an OpenAI-compatible endpoint.

As in tau2 (``tau2/user/user_simulator.py``): the system prompt is the
simulation guidelines followed by the task's scenario in a ``<scenario>`` tag;
the conversation is shown with the roles flipped (the agent's messages as
``user``, the simulator's own as ``assistant``), starting from the agent's
greeting; the reply is the user's next message, and a stop token in it ends the
conversation (``users.STOP_TOKENS``).

``GUIDELINES`` are our wording of tau2's ``simulation_guidelines.md`` (the same
rules and tokens); point ``env.tau.user_guidelines_file`` at tau2's file to use
its exact text.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from agentcredit.envs.tau.chat_client import ChatClient, EndpointUnavailable
from agentcredit.envs.tau.users import OUT_OF_SCOPE, STOP, TRANSFER, UserUnavailable

GUIDELINES = f"""# How to play the user

You are a customer talking to a customer service agent. Play that customer as a real
person would, following the scenario you are given.

## Rules
- Write one message at a time and keep the conversation natural.
- Follow the scenario's instructions exactly.
- Do not invent anything the scenario does not give you: treat it as unknown.
- Do not read the instructions out word for word; say things in your own words.
- Give information only when the agent asks for it, a little at a time.

## Ending the conversation
- Keep going until the task in the scenario is done.
- When your goal is met, write '{STOP}' to end the conversation.
- When you are transferred to another agent, write '{TRANSFER}'.
- When the scenario gives you nothing to go on for what is happening, write '{OUT_OF_SCOPE}'.
"""


def scenario_text(task: dict[str, Any]) -> str:
    """The task's user scenario laid out as tau2 shows it to the simulator (persona, then
    domain, reason for call, known and unknown info, task instructions, each indented)."""
    scenario, tab = task["user_scenario"], "\t"
    instructions = scenario["instructions"]
    if isinstance(instructions, str):
        body = instructions
    else:
        parts = [f"Domain: {instructions['domain']}",
                 f"Reason for call:\n{textwrap.indent(instructions['reason_for_call'], tab)}"]
        for key, title in (("known_info", "Known info"), ("unknown_info", "Unknown info")):
            if instructions.get(key) is not None:
                parts.append(f"{title}:\n{textwrap.indent(instructions[key], tab)}")
        parts.append("Task instructions:\n"
                     f"{textwrap.indent(instructions['task_instructions'], tab)}")
        body = "\n".join(parts)
    lines = []
    if scenario.get("persona") is not None:
        lines += ["Persona:", textwrap.indent(scenario["persona"], tab)]
    lines += ["Instructions:", textwrap.indent(body, tab)]
    return "\n".join(lines)


def system_prompt(task: dict[str, Any], guidelines: str = GUIDELINES) -> str:
    """The simulator's system prompt for ``task``."""
    return f"{guidelines.strip()}\n\n<scenario>\n{scenario_text(task)}\n</scenario>"


def read_guidelines(path: str) -> str:
    """The guidelines in ``path``, or ours when ``path`` is empty."""
    if not path:
        return GUIDELINES
    try:
        return Path(path).read_text()
    except OSError as err:
        raise FileNotFoundError(f"env.tau.user_guidelines_file = {path!r} cannot be read "
                                f"({err.strerror}); give tau2's simulation_guidelines.md or "
                                "leave it empty") from None


class LLMUser:
    """The simulated customer of one conversation (module notes)."""

    def __init__(self, task: dict[str, Any], client: ChatClient, guidelines: str = GUIDELINES):
        self.client = client
        self.messages = [{"role": "system", "content": system_prompt(task, guidelines)}]

    def reply(self, agent_message: str) -> str:
        self.messages.append({"role": "user", "content": agent_message})
        try:
            text = self.client.complete(self.messages)
        except EndpointUnavailable as err:
            raise UserUnavailable(str(err)) from err
        self.messages.append({"role": "assistant", "content": text})
        return text
