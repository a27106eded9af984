"""The tau environment: tau2-bench's retail or airline desk through the agentcredit protocol.

An episode is one tau2 conversation. ``reset`` puts a fresh database behind
the domain's tools and lets the user answer the agent's greeting; the user's
opening message is the first observation. Each ``step`` is one agent turn:

- a tool call (``actions.py``) runs on the database; the observation is
  ``Tool result: <tau2's tool message>``;
- a message goes to the user; the observation is ``User: <reply>``. A reply with a stop
  token ends the conversation; so does an agent message holding ``###STOP###``.

The episode also ends, with reward 0 as in tau2, after ``max_steps`` turns,
after ``max_errors`` tool errors, or when the LLM user's endpoint keeps
failing. At the end the reward is tau2's task reward (``reward.py``); before
it, 0. ``last_reward`` keeps the components, and the info of the last step reports them
(``RewardInfo.metrics``, logged as ``rollout/env/db`` …); ``stats`` holds the endpoint counters.

Bad actions are answered, never raised: a malformed tool call, an unknown
tool or arguments that do not fit the tool come back with tau2's error text,
``valid=False`` and the database unchanged. A tool that refuses a well-formed
call ("Order not found", "Non-pending order cannot be cancelled") is a valid
turn with an error result, as it is for tau2's agent; both kinds count toward
``max_errors``.
"""

from __future__ import annotations

from typing import Any

from agentcredit.envs.base import Observation, StepInfo, Task
from agentcredit.envs.tau.actions import Malformed, Message, ToolCall, parse_action
from agentcredit.envs.tau.chat_client import ChatClient
from agentcredit.envs.tau.database import Database
from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.expert import expert_actions
from agentcredit.envs.tau.judge import make_judge
from agentcredit.envs.tau.llm_user import LLMUser, read_guidelines
from agentcredit.envs.tau.options import TauConfig
from agentcredit.envs.tau.reward import (
    AGENT_STOP,
    MAX_STEPS,
    TOO_MANY_ERRORS,
    USER_ERROR,
    USER_STOP,
    RewardInfo,
    task_reward,
)
from agentcredit.envs.tau.snapshot import state_snapshot
from agentcredit.envs.tau.tasks import ENV_NAMES
from agentcredit.envs.tau.toolkit import (
    BAD_ARGUMENTS,
    UNKNOWN_TOOL,
    call_tool,
    make_toolkit,
    tool_templates,
)
from agentcredit.envs.tau.users import (
    AGENT_GREETING,
    STOP,
    ScriptedUser,
    User,
    UserUnavailable,
    is_stop,
)
from agentcredit.envs.tau.verifier import build_verifier

MAX_TURNS = 30
TOOL_PREFIX, USER_PREFIX = "Tool result: ", "User: "


def tau_task(task: Task) -> tuple[str, dict[str, Any]]:
    """``(domain, the tau2 task)`` of an agentcredit task built by ``tasks.build_tasks``."""
    try:
        domain, tau_id = task.payload["domain"], task.payload["tau_id"]
    except (KeyError, TypeError) as err:
        raise ValueError(f"task {task.task_id!r} is not a tau task: its payload needs "
                         f"'domain' and 'tau_id' ({err})") from None
    return domain, load_domain(domain).tasks[tau_id]


class TauEnv:
    """tau2 ``domain`` (``retail`` or ``airline``) as an ``envs.base.Environment``.

    Args:
        domain: ``retail`` or ``airline``.
        config: the user, the judge and the error limit (``options.TauConfig``).
        max_steps: agent turns after which the conversation ends unrewarded.
    """

    def __init__(self, domain: str, config: TauConfig | None = None,
                 max_steps: int = MAX_TURNS):
        config = TauConfig() if config is None else config
        if domain not in ENV_NAMES:
            raise ValueError(f"unknown tau2 domain {domain!r}; expected one of "
                             f"{tuple(ENV_NAMES)}")
        if max_steps < 1:
            raise ValueError(f"max_steps={max_steps}; expected >= 1")
        self.name = ENV_NAMES[domain]
        self.domain, self.config, self.max_steps = domain, config, max_steps
        self._user_client = (ChatClient(config.user_endpoint) if config.user == "llm" else None)
        self._guidelines = read_guidelines(config.user_guidelines_file)
        self._judge = make_judge(config.judge_endpoint)
        self._task: dict[str, Any] | None = None
        self.last_reward: RewardInfo | None = None

    @property
    def stats(self) -> dict[str, int]:
        """Endpoint counters of the LLM user (empty with the scripted user)."""
        if self._user_client is None:
            return {}
        s = self._user_client.stats
        return {"user_requests": s.requests, "user_failed_attempts": s.failed_attempts,
                "user_given_up": s.given_up}

    def _make_user(self, task: dict[str, Any]) -> User:
        if self._user_client is None:
            return ScriptedUser(task, self.config.patience)
        return LLMUser(task, self._user_client, self._guidelines)

    # EPISODE STATE

    def reset(self, task: Task) -> Observation:
        domain, self._task = tau_task(task)
        if domain != self.domain:
            raise ValueError(f"task {task.task_id!r} is a {domain} task; this environment is "
                             f"{self.name}")
        self.db = Database(load_domain(domain).db)
        self.toolkit = make_toolkit(domain, self.db)
        self.user = self._make_user(self._task)
        self.agent_messages: list[str] = []
        self.conversation: list[dict[str, str]] = [{"role": "assistant",
                                                    "content": AGENT_GREETING}]
        self.steps = self.errors = 0
        self.ending, self.reward, self.last_reward = "", 0.0, None
        text = self._user_says(AGENT_GREETING)
        if self.ending:  # the user ended the conversation (or could not start it)
            self._finish(self.ending)
        return self._observation(USER_PREFIX + text)

    def _require_reset(self) -> None:
        if self._task is None:
            raise RuntimeError("call reset(task) before stepping the tau environment")

    def snapshot(self) -> dict[str, Any]:
        self._require_reset()
        return state_snapshot(self.db, self._task, self.agent_messages, self.ending)

    def admissible_actions(self) -> tuple[str, ...]:
        """The tool-call templates of the domain (arguments to fill in); a message to the user
        is always possible too. Empty once the conversation is over."""
        self._require_reset()
        if self.ending:
            return ()
        return tool_templates(self.domain)

    def _observation(self, text: str) -> Observation:
        # an error text may quote the action, and an action may hold lone surrogates
        text = text.encode("utf-8", "replace").decode("utf-8")
        limit = self.config.observation_chars
        if limit and len(text) > limit:
            text = text[:limit - 1] + "…"
        return Observation(text, self.admissible_actions())

    # STEPS

    def step(self, action_text: str) -> tuple[Observation, float, bool, StepInfo]:
        self._require_reset()
        if self.ending:
            return self._observation("Error: the conversation is over"), self.reward, True, \
                self._info(False)
        self.steps += 1
        action = parse_action(action_text)
        valid = True
        if isinstance(action, Malformed):
            valid, text = False, action.error
            self.errors += 1
        elif isinstance(action, ToolCall):
            outcome = call_tool(self.toolkit, action.name, action.arguments)
            valid = outcome.kind not in (UNKNOWN_TOOL, BAD_ARGUMENTS)
            self.errors += outcome.error
            text = TOOL_PREFIX + outcome.content
        else:
            text = self._agent_says(action)
        if not self.ending and self.errors >= self.config.max_errors:
            self.ending = TOO_MANY_ERRORS
        if not self.ending and self.steps >= self.max_steps:
            self.ending = MAX_STEPS
        if self.ending:
            self._finish(self.ending)
        done = bool(self.ending)
        return self._observation(text), self.reward, done, self._info(valid)

    def _info(self, valid: bool) -> StepInfo:
        """Once the conversation is over, the info carries the reward components."""
        metrics = {} if self.last_reward is None else self.last_reward.metrics()
        return StepInfo(valid, self.reward == 1.0, metrics)

    def _agent_says(self, message: Message) -> str:
        self.agent_messages.append(message.text)
        self.conversation.append({"role": "assistant", "content": message.text})
        if STOP in message.text:
            self.ending = AGENT_STOP
            return "The conversation is over."
        return USER_PREFIX + self._user_says(message.text)

    def _user_says(self, agent_message: str) -> str:
        """The user's reply to ``agent_message``; sets ``ending`` when the reply ends it."""
        try:
            reply = self.user.reply(agent_message)
        except UserUnavailable as err:
            self.ending = USER_ERROR
            return f"(the user simulator is unavailable: {err})"
        self.conversation.append({"role": "user", "content": reply})
        if is_stop(reply):
            self.ending = USER_STOP
        return reply

    def _finish(self, ending: str) -> None:
        self.last_reward = task_reward(self.domain, self._task, self.db.fingerprint(),
                                       self.agent_messages, ending, self._judge,
                                       self.conversation)
        self.reward = self.last_reward.reward

    # ORACLES

    def verifier(self, task: Task):
        domain, tau = tau_task(task)
        return build_verifier(task, domain, tau)

    def expert(self, task: Task) -> list[str]:
        return expert_actions(*tau_task(task))
