"""One rollout of a project environment through an async generate function (no verl import).

verl's agent loops are coroutines that ask an async server for tokens. The project's
rollout logic — prompts, action parsing, the environments' answer to bad input,
rewards (docs/backbones.md §2) — lives in ``rollout.collector.RolloutCollector``, which
calls a synchronous ``Policy``. ``play_rollout`` runs that collector, for one task and
one rollout, in a worker thread, with ``ServerPolicy`` bridging each ``generate`` call
back to the event loop. The steps it records are therefore the embedded collector's
steps by construction; ``agent_loop.py`` turns them into one verl output per step.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import torch

from agentcredit.envs.base import Environment, Task
from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.rollout.records import Trajectory
from agentcredit.train.scoring.verifier_traces import VerifierTracer
from agentcredit.verifier.trace import RolloutTrace

#: ``generate(prompt_ids, temperature, max_new_tokens) -> (token_ids, log_probs)``: one
#: sampled response, stop token included, and each token's log-prob at sampling.
AsyncGenerate = Callable[[list[int], float, int], Awaitable[tuple[list[int], list[float]]]]


class ServerPolicy:
    """The ``rollout.policy.Policy`` protocol over an async ``generate`` on an event loop.

    Called from a worker thread (``play_rollout``); each prompt becomes one request.
    The response text drops the stop tokens, as ``HFPolicy`` does.

    Args:
        tokenizer: the policy's tokenizer.
        generate: the async generate function (see ``AsyncGenerate``).
        loop: the event loop ``generate`` runs on.
        stop_ids: ids that end a response (eos and the model's generation eos ids).
    """

    def __init__(self, tokenizer, generate: AsyncGenerate, loop: asyncio.AbstractEventLoop,
                 stop_ids: Sequence[int]):
        self.tokenizer = tokenizer
        self._generate = generate
        self._loop = loop
        self._stop = frozenset(stop_ids)

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None) -> list[Generation]:
        if tries is not None and any(trie is not None for trie in tries):
            raise ValueError("rollout.decoding=admissible needs logit masks that verl's servers "
                             "do not take; set rollout.decoding=free for verl runs.")
        out = []
        for prompt in prompts:
            request = self._generate(list(prompt), temperature, max_new_tokens)
            ids, logprobs = asyncio.run_coroutine_threadsafe(request, self._loop).result()
            text_ids = [t for t in ids if t not in self._stop]
            out.append(Generation(token_ids=list(ids), logprobs=list(logprobs),
                                  text=self.tokenizer.decode(text_ids, skip_special_tokens=False)))
        return out


class EnvPool:
    """Environment instances shared by the rollouts of one process, one per running rollout.

    ALFWorld instances cache loaded games, so they are reused rather than rebuilt.
    """

    def __init__(self, make_env: Callable[[], Environment]):
        self._make_env = make_env
        self._free: list[Environment] = []
        self._lock = threading.Lock()
        self.tracer = VerifierTracer(make_env)

    def acquire(self) -> Environment:
        with self._lock:
            if self._free:
                return self._free.pop()
        return self._make_env()

    def release(self, env: Environment) -> None:
        with self._lock:
            self._free.append(env)


@dataclass
class Rollout:
    """A finished rollout: the trajectory and, when traced, its verifier trace (plain data)."""

    trajectory: Trajectory
    trace: RolloutTrace | None


async def play_rollout(generate: AsyncGenerate, tokenizer, stop_ids: Sequence[int],
                       pool: EnvPool, task: Task, config: CollectorConfig, *,
                       temperature: float, trace: bool) -> Rollout:
    """One rollout of ``task``: the embedded collector's steps, sampled through ``generate``.

    ``trace``: also trace it through the task's verifier (VICT's input), in the worker thread.
    Exceptions propagate; the agent loop decides what a failed rollout means.
    """
    policy = ServerPolicy(tokenizer, generate, asyncio.get_running_loop(), stop_ids)

    def work() -> Rollout:
        env = pool.acquire()
        try:
            collector = RolloutCollector(policy, lambda: env, config)
            # the server samples; the collector's generator is never drawn from
            (trajectory,) = collector.collect([task], 1, temperature=temperature,
                                              generator=torch.Generator())
        finally:
            pool.release(env)
        return Rollout(trajectory, pool.tracer.trace_one(trajectory) if trace else None)

    return await asyncio.to_thread(work)
