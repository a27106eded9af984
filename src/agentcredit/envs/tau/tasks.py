"""tau2 tasks by split, as agentcredit ``Task`` s.

Splits are tau2's (``split_tasks.json``): ``train`` and ``test`` (retail 74 / 40,
airline 30 / 20); ``base`` holds every task. A task's id is
``<env>-<tau2 id>`` (``tau-retail-17``), its payload names the domain and the
tau2 id, its ``task_type`` is the first write tool of its golden actions
(``cancel_pending_order``, ``book_reservation`` …; ``no_write`` when the right
outcome changes nothing), and its instruction is what the agent is told every
step: how to act, and with ``env.tau.instruction=policy`` the domain policy.
"""

from __future__ import annotations

from agentcredit.envs.base import Task
from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.options import TauConfig
from agentcredit.envs.tau.reward import golden_actions, reward_basis
from agentcredit.envs.tau.toolkit import TOOLKITS

SPLITS = ("train", "test", "base")
ENV_NAMES = {"retail": "tau-retail", "airline": "tau-airline"}
NO_WRITE = "no_write"

HOW_TO_ACT = (
    "You are a customer service agent of the {domain} desk. In each turn do one thing: call "
    'one tool, written <tool_call>{{"name": <tool>, "arguments": {{...}}}}</tool_call>, or '
    "send one message to the customer as plain text. The tools are the admissible actions; "
    "fill in their arguments.")


def agent_instruction(domain: str, config: TauConfig) -> str:
    """What the agent is told each step (module notes)."""
    text = HOW_TO_ACT.format(domain=domain)
    if config.instruction == "policy":
        text += f"\n\n<policy>\n{load_domain(domain).policy.strip()}\n</policy>"
    return text


def task_type(domain: str, tau_task: dict) -> str:
    """The first write tool of the golden actions, or ``no_write``."""
    writes = TOOLKITS[domain].WRITE_TOOLS
    return next((a["name"] for a in golden_actions(tau_task) if a["name"] in writes), NO_WRITE)


def build_tasks(domain: str, split: str, config: TauConfig | None = None) -> list[Task]:
    """The tasks of ``split`` of ``domain``, in tau2's order (the first ``max_tasks``)."""
    config = TauConfig() if config is None else config
    if split not in SPLITS:
        raise ValueError(f"unknown tau2 split {split!r}; expected one of {SPLITS}")
    source = load_domain(domain)
    ids = source.splits[split]
    if config.max_tasks:
        ids = ids[:config.max_tasks]
    instruction = agent_instruction(domain, config)
    tasks = []
    for tau_id in ids:
        tau_task = source.tasks[tau_id]
        reward_basis(tau_task)  # refuse a basis we cannot compute now, not mid-run
        tasks.append(Task(task_id=f"{ENV_NAMES[domain]}-{tau_id}", env=ENV_NAMES[domain],
                          split=split, instruction=instruction,
                          task_type=task_type(domain, tau_task),
                          payload={"domain": domain, "tau_id": tau_id}))
    return tasks
