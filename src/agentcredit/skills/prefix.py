"""Where the skill goes in a prompt (docs/adrs.md §5.1): ``[Privileged Skill Information]\\n`` +
skill + ``\\n\\n``.

**Placement: at the start of the first user message** of a chat, i.e. after the
system turn and the user-role header, before the ordinary user text ("Your task
is to: …"). For a plain prompt string (a base model without a chat template)
the prefix goes before the whole string. Why the user message and not before
the system turn: ADRS inserts the skill "before the ordinary prompt", and in a
chat the ordinary prompt is the user turn the environment writes; text placed
before ``<|im_start|>system`` sits outside every turn, a format an instruction-
tuned checkpoint has never seen. The system turn and the user header are the
same for every step of a run, so ``system turn + user header + skill prefix``
is still one token prefix shared by every rollout and step of a task, which
is what the teacher pass caches (``train/scoring/teacher.py``).

Two levels, one placement:

- ``insert_skill`` edits chat messages or a prompt string (text level), for
  prompts that are built from text (the ``skill_prompt`` / ``skill_grpo``
  baselines, which show the skill to the acting policy).
- ``SkillSplicer`` edits *token ids*: it inserts the tokenised skill prefix into
  an already tokenised prompt at the same place. The teacher pass and the SFT
  skill mixing use it, so the sampled response tokens are never re-tokenised
  and every consumer sees byte-identical privileged prompts. Decoding a spliced
  prompt gives exactly the text ``insert_skill`` + the chat template gives
  (tested); only the token boundary at the end of the skill may differ from
  tokenising that text in one go.

**Budget: the skill shares the prompt budget** (docs/adrs.md §5.1). With
``max_prompt_tokens`` set, a privileged prompt longer than the budget is
left-truncated, its first tokens dropped until it fits, as the ADRS authors
truncate the prepended teacher prompt. Since the skill sits after the system turn
and the user header, the system turn goes first, then the user header, then the
start of the skill.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, overload

from jinja2 import TemplateError

if TYPE_CHECKING:
    from agentcredit.rollout.records import Trajectory
    from agentcredit.skills.provider import SkillProvider

SKILL_HEADER = "[Privileged Skill Information]\n"

# Probe contents used to read the chat template's user header; never appear in real text.
_SYSTEM_PROBE = "\u2603agentcredit-system\u2603"
_USER_PROBE = "\u2603agentcredit-user\u2603"


def skill_prefix(skill: str) -> str:
    """``[Privileged Skill Information]\\n`` + ``skill`` + ``\\n\\n`` (docs/adrs.md §5.1,
    verbatim)."""
    return f"{SKILL_HEADER}{skill}\n\n"


@overload
def insert_skill(prompt: str, skill: str) -> str: ...
@overload
def insert_skill(prompt: Sequence[dict[str, str]], skill: str) -> list[dict[str, str]]: ...


def insert_skill(prompt, skill):
    """The prompt with ``skill_prefix(skill)`` before its ordinary text.

    Args:
        prompt: chat messages (``[{"role": …, "content": …}, …]``): the prefix
            goes at the start of the first ``user`` message (a new list is
            returned, the input is not modified); or a prompt string: the prefix
            goes before it.
        skill: the skill text ``ρ(x)`` (``SkillProvider.skill_text``).
    """
    prefix = skill_prefix(skill)
    if isinstance(prompt, str):
        return prefix + prompt
    messages = [dict(message) for message in prompt]
    for message in messages:
        if message.get("role") == "user":
            message["content"] = prefix + (message.get("content") or "")
            return messages
    raise ValueError(
        f"insert_skill found no user message among roles "
        f"{[m.get('role') for m in messages]}; the skill goes at the start of the first user "
        "message, so add one (or pass the prompt as a string)."
    )


class SkillSplicer:
    """Inserts the tokenised skill prefix into tokenised prompts, where ``insert_skill`` puts it.

    Args:
        tokenizer: the policy's tokenizer. With a chat template, the insertion
            point is the end of the first user-role header (found by rendering
            the template on probe messages); without one, position 0.
        max_prompt_tokens: the prompt budget the skill shares (``rollout.max_prompt_tokens``):
            a longer privileged prompt loses its first tokens; ``None`` = no budget.

    ``splice(prompt_ids, text)`` returns ``(shared_prefix, rest)`` with
    ``shared_prefix + rest`` the privileged prompt: ``shared_prefix`` is the
    prompt up to the insertion point followed by ``prefix_ids(text)`` (the
    same for every step of a task unless the budget cuts it), ``rest`` the remainder of
    the prompt. Here ``text`` is a skill and its prefix ``skill_prefix(text)``, token ids
    cached per skill text; a subclass that splices another privileged text in the same
    place overrides ``prefix_ids`` (``HindsightSplicer``: a rollout's final observation).
    """

    def __init__(self, tokenizer, max_prompt_tokens: int | None = None) -> None:
        if max_prompt_tokens is not None and max_prompt_tokens < 1:
            raise ValueError(f"SkillSplicer max_prompt_tokens = {max_prompt_tokens} must be >= 1 "
                             "(or None for no budget)")
        self.tokenizer = tokenizer
        self.max_prompt_tokens = max_prompt_tokens
        self._prefix_ids: dict[str, tuple[int, ...]] = {}
        self._after_system: list[int] | None = None
        self._leading: list[int] | None = None
        if getattr(tokenizer, "chat_template", None):
            self._after_system, self._leading = self._user_headers()

    def _encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def _user_headers(self) -> tuple[list[int] | None, list[int]]:
        """Token ids the template writes between a system message and the user text, and
        before the user text of a conversation without a system message."""
        render = self.tokenizer.apply_chat_template
        alone = render([{"role": "user", "content": _USER_PROBE}], tokenize=False)
        leading = self._encode(alone[:alone.index(_USER_PROBE)])
        try:
            both = render([{"role": "system", "content": _SYSTEM_PROBE},
                           {"role": "user", "content": _USER_PROBE}], tokenize=False)
        except TemplateError:  # the template rejects a system role (raise_exception)
            return None, leading
        start = both.index(_SYSTEM_PROBE) + len(_SYSTEM_PROBE)
        return self._encode(both[start:both.index(_USER_PROBE)]), leading

    def prefix_ids(self, skill: str) -> tuple[int, ...]:
        """Token ids of the prefix spliced in for ``skill``: ``skill_prefix(skill)``."""
        if skill not in self._prefix_ids:
            self._prefix_ids[skill] = tuple(self._encode(skill_prefix(skill)))
        return self._prefix_ids[skill]

    def insertion_offset(self, prompt_ids: Sequence[int]) -> int:
        """Index in ``prompt_ids`` where the first user message's text starts (0 without a
        template)."""
        if self._leading is None:
            return 0
        ids = list(prompt_ids)
        if self._after_system:
            header, n = self._after_system, len(self._after_system)
            for start in range(len(ids) - n + 1):
                if ids[start:start + n] == header:
                    return start + n
        if ids[:len(self._leading)] == self._leading:
            return len(self._leading)
        raise ValueError(
            "SkillSplicer could not find the first user message in a prompt of "
            f"{len(ids)} tokens: expected the tokens of the chat template's user header "
            f"{self.tokenizer.decode(self._after_system or self._leading)!r}. Build prompts "
            "with this tokenizer's apply_chat_template (rollout.prompts.build_prompt_ids)."
        )

    def splice(self, prompt_ids: Sequence[int], text: str) -> tuple[tuple[int, ...], list[int]]:
        """``(shared_prefix, rest)``: the privileged prompt is ``shared_prefix + rest``, at most
        ``max_prompt_tokens`` long (left-truncated); ``shared_prefix`` keeps at least one token.
        ``text`` is what ``prefix_ids`` takes (a skill here)."""
        offset = self.insertion_offset(prompt_ids)
        shared, rest = tuple(prompt_ids[:offset]) + self.prefix_ids(text), list(prompt_ids[offset:])
        excess = 0 if self.max_prompt_tokens is None else \
            len(shared) + len(rest) - self.max_prompt_tokens
        if excess <= 0:
            return shared, rest
        if excess < len(shared):
            return shared[excess:], rest
        rest = rest[excess - len(shared):]  # the ordinary prompt alone is over budget
        return (rest[0],), rest[1:]

    def privileged_prompt_ids(self, prompt_ids: Sequence[int], text: str) -> list[int]:
        """The prompt ids with ``prefix_ids(text)`` inserted (the skill prefix, for a skill)."""
        shared, rest = self.splice(prompt_ids, text)
        return list(shared) + rest


def with_skill_prompts(trajectories: Sequence[Trajectory], provider: SkillProvider,
                       splicer: SkillSplicer) -> list[Trajectory]:
    """Copies of ``trajectories`` whose every step prompt carries its task's skill prefix.

    For the SFT warm start of the embedded model: a model
    that never saw the prefix in training treats ~500 tokens of unfamiliar text
    as noise, so its ``ℓ^T`` is a corrupted ``ℓ^b``; mixing demonstrations with
    and without the prefix makes the skill-conditioned branch a working
    policy. A real instruction-tuned checkpoint needs no such step. Responses,
    rewards and everything else are unchanged.

    Caveat, measured by the probe gap ``ℓ^T − ℓ^b`` (``train/evaluation/probes.py``): an
    expert demonstration is the same action with or without the skill, so this
    mixing teaches the tiny model to *tolerate* the prefix, not to extract
    procedures it never needed; expect ``ℓ^T`` close to ``ℓ^b``. ADRS's
    calibrated score ``q̂`` is built from ``ℓ^T`` alone, centred per step, so
    it still carries a signal then; what the skill adds on top is the gap.
    """
    out = []
    for trajectory in trajectories:
        skill = provider.skill_text(trajectory.task)
        steps = [dataclasses.replace(step, prompt_ids=splicer.privileged_prompt_ids(
            step.prompt_ids, skill)) for step in trajectory.steps]
        out.append(dataclasses.replace(trajectory, steps=steps))
    return out
