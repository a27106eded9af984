"""Hostile action streams for the environment fuzz tests and benchmarks (run safety).

``HostileActions(rng).draw(admissible)`` returns one hostile action of a kind in
``KINDS``: random printable text, random unicode, blanks, admissible commands
with random character edits or extra tokens, 10k-100k-character strings, text
that is not valid UTF-8 when encoded (lone surrogates, ``surrogateescape``-decoded
random bytes), and commands carrying NUL or other control characters. For an environment
whose actions are JSON tool calls (tau), ``TOOL_CALL_KINDS`` add calls nested thousands
deep, number literals of thousands of digits (and ``NaN``, ``1e999``), and well-formed
calls of the admissible tools with arguments of every JSON type in place of the right one.

``fuzz(env, tasks, n_actions, seed, kinds=KINDS)`` plays such actions mixed with valid ones (the
expert's plan in half the episodes, random admissible actions otherwise, so
episodes progress and end), checks the environment protocol (``envs/base.py``)
after every step with ``step_problems``, and returns a ``FuzzReport``. An
environment passes when the report has no exceptions and no inconsistencies.
The run is a function of ``seed``: a failure's index replays it.
"""

from __future__ import annotations

import json
import math
import random
import re
import string
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentcredit.envs.base import Environment, Observation, StepInfo, Task

KINDS = ("printable", "unicode", "blank", "edited", "extra_tokens", "long", "non_utf8",
         "control")
TOOL_CALL_KINDS = ("json_nested", "json_number", "json_call")
HOSTILITY = (0.1, 0.5, 0.9)
"""Per episode, the share of hostile actions is one of these (the rest are valid)."""
LONG_CHARS = (10_000, 100_000)

_BLANKS = ("", " ", "\t", "\n", "\r\n", " \t\n ", "\u00a0", "\u2028", "\u3000", "\x0b\x0c",
           "\x1c\x1d\x1e\x1f", "\x85", "\u200b", "\ufeff")
_UNICODE_RANGES = (
    (0x00A0, 0x00FF),    # Latin-1
    (0x0300, 0x036F),    # combining marks
    (0x0400, 0x04FF),    # Cyrillic (homoglyphs of Latin letters)
    (0x200B, 0x200F),    # zero-width and direction marks
    (0x202A, 0x202E),    # bidi embeddings and overrides
    (0x4E00, 0x9FFF),    # CJK
    (0xE000, 0xF8FF),    # private use
    (0xFFF0, 0xFFFF),    # specials and non-characters
    (0x1F300, 0x1FAFF),  # emoji (outside the BMP)
    (0x10FFFE, 0x10FFFF),
)
_EXTRAS = ("please", "now", "and", "then", "look", "the", "[", "]", "[[", "]]", "<action>",
           "</action>", "Action:", ">", "go to", "click[", "search[", "0", "-1", "99999999")
_FALLBACK = ("look", "inventory", "search[shoes]", "click[buy now]")
_TEMPLATE = re.compile(r"(\w+)\[<[^\]]*>\]")
_TOOL_NAME = re.compile(r'"name": "(\w+)"')
_ARGUMENT = re.compile(r'"(\w+)": "<')


class HostileActions:
    """Draws hostile actions of ``kinds`` from ``rng``; each builder reads the current
    admissible actions."""

    def __init__(self, rng: random.Random, kinds: Sequence[str] = KINDS):
        self.rng, self.kinds = rng, tuple(kinds)

    def draw(self, admissible: Sequence[str]) -> tuple[str, str]:
        """``(kind, action)`` with ``kind`` drawn uniformly from ``kinds``."""
        kind = self.rng.choice(self.kinds)
        return kind, getattr(self, "_" + kind)(admissible)

    def _command(self, admissible: Sequence[str]) -> str:
        return self.rng.choice(admissible or _FALLBACK)

    def _char(self) -> str:
        lo, hi = self.rng.choice(_UNICODE_RANGES)
        return chr(self.rng.randint(lo, hi))

    def _printable(self, admissible: Sequence[str]) -> str:
        return "".join(self.rng.choices(string.printable, k=self.rng.randint(1, 80)))

    def _unicode(self, admissible: Sequence[str]) -> str:
        return "".join(self._char() for _ in range(self.rng.randint(1, 40)))

    def _blank(self, admissible: Sequence[str]) -> str:
        return "".join(self.rng.choices(_BLANKS, k=self.rng.randint(1, 4)))

    def _edited(self, admissible: Sequence[str]) -> str:
        """1-3 of: insert, delete, swap, replace (ASCII or unicode), flip case, whole-case."""
        rng, text = self.rng, self._command(admissible)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text) + 1)
            op = rng.randrange(6)
            if op == 0:
                text = text[:i] + rng.choice(string.printable + self._char()) + text[i:]
            elif op == 1:
                text = text[:i] + text[i + 1:]
            elif op == 2:
                text = text[:i] + text[i + 1:i + 2] + text[i:i + 1] + text[i + 2:]
            elif op == 3:
                text = text[:i] + self._char() + text[i + 1:]
            elif op == 4:
                text = text[:i] + text[i:i + 1].swapcase() + text[i + 1:]
            else:
                text = rng.choice((str.upper, str.lower, str.title))(text)
        return text

    def _extra_tokens(self, admissible: Sequence[str]) -> str:
        """A command with words before, after or inside it, or two commands in one."""
        rng, command = self.rng, self._command(admissible)
        tokens = command.split() or [command]
        for _ in range(rng.randint(1, 3)):
            extra = rng.choice((*_EXTRAS, rng.choice(tokens), self._command(admissible)))
            tokens.insert(rng.randint(0, len(tokens)), extra)
        return rng.choice((" ", "  ", "\n", "")).join(tokens)

    def _long(self, admissible: Sequence[str]) -> str:
        rng, command = self.rng, self._command(admissible)
        n = rng.randint(*LONG_CHARS)
        shape = rng.randrange(4)
        if shape == 0:
            return (command + " ") * (n // (len(command) + 1) + 1)
        if shape == 1:
            return "".join(rng.choices(string.printable, k=n))
        if shape == 2:
            return " " * (n // 2) + command + " " * (n // 2)
        verb = command.split("[", 1)[0] if "[" in command else command
        return f"{verb}[{'x' * n}]"

    def _non_utf8(self, admissible: Sequence[str]) -> str:
        """Random bytes decoded with ``surrogateescape``, or a command with a lone surrogate or
        a corrupted byte; ``text.encode('utf-8')`` raises on every result."""
        rng, command = self.rng, self._command(admissible)
        shape = rng.randrange(3)
        if shape == 0:
            text = rng.randbytes(rng.randint(1, 64)).decode("utf-8", errors="surrogateescape")
        elif shape == 1:
            i = rng.randint(0, len(command))
            text = command[:i] + chr(rng.randint(0xD800, 0xDFFF)) + command[i:]
        else:
            raw = bytearray(command.encode("utf-8"))
            raw[rng.randrange(len(raw))] = rng.choice((0x80, 0xC0, 0xFE, 0xFF))
            text = bytes(raw).decode("utf-8", errors="surrogateescape")
        return text if not is_utf8(text) else text + "\udcff"

    def _control(self, admissible: Sequence[str]) -> str:
        """A command with NUL, C0/C1 control or DEL characters inside or around it."""
        rng, text = self.rng, self._command(admissible)
        controls = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
        for _ in range(rng.randint(1, 4)):
            i = rng.randint(0, len(text))
            text = text[:i] + rng.choice(("\x00", *controls)) + text[i:]
        return text


    def _tool_name(self, admissible: Sequence[str]) -> str:
        names = [m.group(1) for a in admissible for m in [_TOOL_NAME.search(a)] if m]
        return self.rng.choice(names or ["calculate"])

    def _wrap(self, body: str) -> str:
        return self.rng.choice((body, f"<tool_call>{body}</tool_call>"))

    def _json_nested(self, admissible: Sequence[str]) -> str:
        """A call whose arguments, or the whole call, nest 65 to 100,000 brackets deep."""
        rng = self.rng
        depth = rng.choice((65, 1_000, 5_000, 100_000))
        opened, closed = rng.choice((("[" * depth, "]" * depth),
                                     ('{"a": ' * depth, "}" * depth)))
        if rng.random() < 0.5:
            return self._wrap(f'{{"name": "{self._tool_name(admissible)}", "arguments": '
                              f'{{"x": {opened}1{closed}}}}}')
        return self._wrap(opened + "1" * (opened[0] == "{") + closed)

    def _json_number(self, admissible: Sequence[str]) -> str:
        """A call with an argument of 4,301 to 20,000 digits, a long float, NaN or 1e999."""
        rng = self.rng
        number = rng.choice(("9" * rng.randint(4_301, 20_000), "-" + "1" * 5_000,
                             "0." + "3" * 5_000, "1e999", "-1e999", "NaN", "Infinity",
                             "-Infinity", "1" + "0" * 400 + "e-400"))
        return self._wrap(f'{{"name": "{self._tool_name(admissible)}", "arguments": '
                          f'{{"x": {number}}}}}')

    def _json_call(self, admissible: Sequence[str]) -> str:
        """An admissible tool's call with its arguments (or name) replaced by other JSON."""
        rng = self.rng
        values = (None, True, 0, -1, 2**63, 1.5, "", "x" * 10_000, [], [1, [2]], {},
                  {"nested": {"deeper": [None]}}, "\u0000", "\ud800")
        call = {"name": self._tool_name(admissible), "arguments": {}}
        template = rng.choice(admissible) if admissible else ""
        for argument in _ARGUMENT.findall(template):
            call["arguments"][argument] = rng.choice(values)
        shape = rng.randrange(5)
        if shape == 0:
            call["name"] = rng.choice(values)
        elif shape == 1:
            call["arguments"] = rng.choice(values)
        elif shape == 2:
            call[rng.choice(("args", "id", "name "))] = rng.choice(values)
        elif shape == 3:
            call["arguments"][rng.choice(("x", "", "__class__"))] = rng.choice(values)
        return self._wrap(json.dumps(call))


def is_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (False for lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def step_problems(env: Environment, result: Any, before: dict, before_actions: tuple,
                  done_before: bool) -> list[str]:
    """What is inconsistent after a step: the protocol's types, a valid flag, the state left
    unchanged by an invalid action, and ``admissible_actions`` agreeing with the observation."""
    if not (isinstance(result, tuple) and len(result) == 4):
        return [f"step returned {type(result).__name__}, not (obs, reward, done, info)"]
    obs, reward, done, info = result
    problems = []
    if not (isinstance(obs, Observation) and isinstance(obs.text, str)):
        problems.append(f"observation {obs!r:.80} is not an Observation with text")
    elif not is_utf8(obs.text):
        problems.append("the observation text does not encode as UTF-8")
    if not (isinstance(reward, float) and math.isfinite(reward) and 0.0 <= reward <= 1.0):
        problems.append(f"reward {reward!r} is not a float in [0, 1]")
    if not isinstance(done, bool):
        problems.append(f"done {done!r} is not a bool")
    if not (isinstance(info, StepInfo) and isinstance(info.valid, bool)
            and isinstance(info.won, bool)):
        return [*problems, f"info {info!r:.80} is not a StepInfo with bool valid and won"]
    if info.won and not done:
        problems.append("won but not done")
    actions = env.admissible_actions()
    if not (isinstance(actions, tuple) and all(isinstance(a, str) for a in actions)):
        problems.append(f"admissible_actions() is {actions!r:.80}, not a tuple of str")
    elif isinstance(obs, Observation) and actions != obs.admissible_actions:
        problems.append("admissible_actions() differs from the observation's")
    if not info.valid:
        if env.snapshot() != before:
            problems.append("an invalid action changed the snapshot")
        if not done and actions != before_actions:
            problems.append("an invalid action changed the admissible actions")
    if done_before and (info.valid or not done):
        problems.append(f"a step after the episode ended gave valid={info.valid}, done={done}")
    return problems


@dataclass
class Failure:
    """One exception or inconsistency: where in the run, on which action, and what."""

    index: int
    task_id: str
    kind: str
    action: str
    problem: str

    def __str__(self) -> str:
        action = repr(self.action)
        action = action if len(action) <= 100 else action[:97] + "..."
        return f"#{self.index} {self.task_id} [{self.kind}] {action}: {self.problem}"


@dataclass
class FuzzReport:
    """What a fuzz run did and found; ``failures()`` must be empty for an environment to pass."""

    actions: int = 0
    exceptions: list[Failure] = field(default_factory=list)
    inconsistencies: list[Failure] = field(default_factory=list)
    episodes: int = 0
    valid_steps: int = 0
    dones: int = 0
    wins: int = 0
    kinds: Counter = field(default_factory=Counter)
    non_utf8_actions: int = 0
    longest_action: int = 0
    seconds: float = 0.0

    def failures(self) -> list[Failure]:
        return [*self.exceptions, *self.inconsistencies]

    def coverage_gaps(self, kinds: Sequence[str] = KINDS) -> list[str]:
        """What the run failed to exercise (an empty list when it reached everything)."""
        gaps = [f"no {kind} action" for kind in kinds if not self.kinds[kind]]
        if not self.non_utf8_actions:
            gaps.append("no action that is not valid UTF-8")
        if self.longest_action < LONG_CHARS[0]:
            gaps.append(f"no action of {LONG_CHARS[0]} characters or more")
        if not self.wins:
            gaps.append("no episode won")
        if self.dones < 2:
            gaps.append("fewer than 2 episodes ended (no reset after done)")
        return gaps

    def metrics(self) -> dict[str, float]:
        """The benchmark figures (``benchmarks/*_env.py``)."""
        return {"fuzz_actions": self.actions, "fuzz_exceptions": len(self.exceptions),
                "fuzz_inconsistencies": len(self.inconsistencies),
                "fuzz_seconds": round(self.seconds, 3)}

    def record(self) -> dict[str, Any]:
        """What the run exercised, for a benchmark's config."""
        return {"episodes": self.episodes, "valid_steps": self.valid_steps, "dones": self.dones,
                "wins": self.wins, "non_utf8_actions": self.non_utf8_actions,
                "longest_action": self.longest_action, "kinds": dict(sorted(self.kinds.items())),
                "failures": [str(f) for f in self.failures()[:20]]}

    def summary(self, limit: int = 5) -> str:
        head = (f"{self.actions} actions, {self.episodes} episodes, {self.valid_steps} valid, "
                f"{self.wins} won; {len(self.exceptions)} exceptions, "
                f"{len(self.inconsistencies)} inconsistencies")
        return "\n".join([head, *(str(f) for f in self.failures()[:limit])])


def _valid_action(admissible: Sequence[str], words: list[str], rng: random.Random) -> str:
    """A random admissible action; a template such as ``search[<your query>]`` gets words of
    the instruction."""
    action = rng.choice(admissible or _FALLBACK)
    template = _TEMPLATE.fullmatch(action)
    if template is None or not words:
        return action
    return f"{template.group(1)}[{' '.join(rng.sample(words, min(len(words), 4)))}]"


def _play(env: Environment, task: Task, rng: random.Random, hostile: HostileActions,
          report: FuzzReport, n_actions: int, max_episode_steps: int) -> None:
    """One episode from reset until it ends (plus one action after the end), fails, or runs
    out of steps or actions."""
    obs = env.reset(task)
    before, verifier = env.snapshot(), env.verifier(task)
    hostility = rng.choice(HOSTILITY)
    plan = list(env.expert(task)) if rng.random() < 0.5 else []
    words = task.instruction.replace(",", " ").split()
    done, steps = False, 0
    while report.actions < n_actions and (done or steps < max_episode_steps):
        steps += 1
        if done or rng.random() < hostility:
            kind, action = hostile.draw(obs.admissible_actions)
        elif plan:
            kind, action = "plan", plan[0]
        else:
            kind, action = "admissible", _valid_action(obs.admissible_actions, words, rng)
        index, report.actions = report.actions, report.actions + 1
        report.kinds[kind] += 1
        report.non_utf8_actions += not is_utf8(action)
        report.longest_action = max(report.longest_action, len(action))
        failure = Failure(index, task.task_id, kind, action, "")
        try:
            result = env.step(action)
            problems = step_problems(env, result, before, obs.admissible_actions, done)
            if not isinstance(verifier.is_commit(action), bool):
                problems.append("the verifier's is_commit did not return a bool")
        except Exception as err:  # noqa: BLE001  (the fuzz counts every exception)
            failure.problem = "".join(traceback.format_exception_only(err)).strip()
            report.exceptions.append(failure)
            return
        if problems:
            failure.problem = "; ".join(problems)
            report.inconsistencies.append(failure)
            return
        if done:
            return
        obs, _, done, info = result
        before = env.snapshot()
        report.valid_steps += info.valid
        if kind == "plan":
            plan = plan[1:] if info.valid else []
        elif info.valid:
            plan = []  # an action off the plan derails it
        if done:
            report.dones += 1
            report.wins += info.won


def fuzz(env: Environment, tasks: Sequence[Task], n_actions: int, seed: int,
         max_episode_steps: int = 100, kinds: Sequence[str] = KINDS) -> FuzzReport:
    """Play ``n_actions`` actions on ``env`` over ``tasks`` in turn (reset to the next task
    when an episode ends or after ``max_episode_steps``), the hostile ones of ``kinds``, and
    report what went wrong."""
    rng = random.Random(seed)
    hostile, report = HostileActions(rng, kinds), FuzzReport()
    start = time.perf_counter()
    while report.actions < n_actions:
        task = tasks[report.episodes % len(tasks)]
        report.episodes += 1
        _play(env, task, rng, hostile, report, n_actions, max_episode_steps)
    report.seconds = time.perf_counter() - start
    return report
