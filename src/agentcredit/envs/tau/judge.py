"""The NL-assertion judge: an LLM on an OpenAI-compatible endpoint reads the conversation and
says whether each of the task's assertions holds (tau2's ``NLAssertionsEvaluator``).

The judge is shown the conversation (customer and agent turns) and the
assertions, and answers JSON ``{"results": [{"assertion": ..., "reasoning": ...,
"met": true|false}, ...]}``, one result per assertion in order. The verdict is
1.0 when every assertion is met, else 0.0; an answer that is not such JSON, or
an endpoint that keeps failing, gives no verdict (the component is then
skipped and reported, never fatal).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentcredit.envs import bounded_json
from agentcredit.envs.tau.chat_client import ChatClient, EndpointUnavailable
from agentcredit.envs.tau.options import EndpointConfig
from agentcredit.envs.tau.reward import Judge

JUDGE_PROMPT = """You check a customer service conversation against expected outcomes.
For each expected outcome, decide from the conversation alone whether the agent's behaviour
meets it. Answer with JSON only, in this form:
{"results": [{"assertion": "<the outcome>", "reasoning": "<one sentence>", "met": true}]}
with one result per expected outcome, in the order given."""


def transcript(conversation: Sequence[dict[str, str]]) -> str:
    """The conversation as ``agent:`` / ``customer:`` lines."""
    names = {"assistant": "agent", "user": "customer"}
    return "\n".join(f"{names.get(m['role'], m['role'])}: {m['content']}" for m in conversation)


def parse_verdict(text: str, assertions: Sequence[str]) -> float | None:
    """1.0 / 0.0 from the judge's JSON answer, or None when it is not one result per
    assertion."""
    start, end = text.find("{"), text.rfind("}")
    try:
        results = bounded_json.loads(text[start:end + 1])["results"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(results, list) or len(results) != len(assertions):
        return None
    if not all(isinstance(r, dict) and isinstance(r.get("met"), bool) for r in results):
        return None
    return float(all(r["met"] for r in results))


class LLMJudge:
    """A ``reward.Judge`` on ``client`` (module notes)."""

    def __init__(self, client: ChatClient):
        self.client = client

    def __call__(self, task: dict[str, Any], conversation: Sequence[dict[str, str]],
                 assertions: Sequence[str]) -> float | None:
        outcomes = "\n".join(f"{i + 1}. {a}" for i, a in enumerate(assertions))
        messages = [{"role": "system", "content": JUDGE_PROMPT},
                    {"role": "user", "content": f"Conversation:\n{transcript(conversation)}\n\n"
                                                f"Expected outcomes:\n{outcomes}"}]
        try:
            return parse_verdict(self.client.complete(messages), assertions)
        except EndpointUnavailable:
            return None


def make_judge(endpoint: EndpointConfig) -> Judge | None:
    """The judge on ``endpoint``, or None when it has no ``base_url`` (assertions skipped)."""
    return LLMJudge(ChatClient(endpoint)) if endpoint.base_url else None
