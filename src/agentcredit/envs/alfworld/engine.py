"""The real ALFWorld engine: TextWorld's ``PddlEnv`` on ALFRED's domain and grammar.

``AlfWorldEnv`` speaks the agentcredit environment protocol. Entity names are
demangled with ALFWorld's own ``Demangler`` (``Egg_bar__plus_01...`` -> ``egg 1``),
the expert is the Fast Downward plan stored as the game's walkthrough (replanned
from the start state when a game has none), and the state snapshot is the set of
positive PDDL facts after each step (``not_*`` entries dropped), as
``{"ishot(egg 1)": True, ...}``. Two memos make its steps cheap with the same results:
``grammar_memo`` (TextWorld's grammar parsing) and ``state_memo`` (what the grammar derives
from each state, kept per numbered state).
"""

from __future__ import annotations

import random
import weakref
from pathlib import Path
from typing import Any

import fast_downward
import textworld
from alfworld.agents.utils.misc import Demangler
from textworld.envs.pddl import PddlEnv

from agentcredit.envs.alfworld import grammar_memo, state_memo
from agentcredit.envs.alfworld.expert import demonstrate, noisy_demonstration
from agentcredit.envs.alfworld.game_file import GameFileError, read_game_file
from agentcredit.envs.alfworld.state_memo import StateMemo
from agentcredit.envs.alfworld.verifier import build_verifier
from agentcredit.envs.base import Observation, StepInfo, Task

NOTHING_HAPPENS = "Nothing happens."
_WELCOME = "-= Welcome to TextWorld, ALFRED! =-"


def _game_path(task: Task) -> str:
    path = task.payload.get("game_file")
    if not path:
        raise GameFileError(f"task {task.task_id!r} has no payload['game_file']")
    return path


def _fact_text(fact: Any) -> str:
    return f"{fact.name}({', '.join(v.name for v in fact.arguments)})"


def _clean_feedback(text: str) -> str:
    return text.replace(_WELCOME, "").strip()


_SPARE_PLANNERS: list[Any] = []
"""Loaded copies of Fast Downward's library that no engine holds, for the next engine."""


class _PlannerEnv(PddlEnv):
    """TextWorld's ``PddlEnv`` on a given copy of Fast Downward's library.

    Fast Downward keeps the game state in the library's globals, so TextWorld loads
    a fresh copy of ``libdownward.so`` (34 MB, written to the temp directory) for
    every ``PddlEnv`` and never unloads it; a process that makes one per game fills
    the disk. Unloading is no cure (loading a copy again after unloading others can
    crash the process), so copies are reused instead: this skips ``PddlEnv``'s
    loader and takes the library it is given.
    """

    def __init__(self, infos: textworld.EnvInfos, downward_lib: Any, remember_states: bool):
        textworld.core.Environment.__init__(self, infos)
        self.downward_lib = downward_lib
        # the state memo (state_memo.py); not with the planner's replans, which it does not hold
        self.remember_states = remember_states and not infos.policy_commands
        self.memo: StateMemo | None = None  # the loaded game's, when remembering
        self._state_number: int | None = None  # the current state's, None until known
        self._came_from: tuple[int, int] | None = None  # (state, operator) of the last step
        self._gathering = False  # inside _gather_infos on a state met for the first time

    def load(self, data: dict, source: str = "<game>") -> None:
        """``PddlEnv.load`` of the game ``data``; ``source`` names it for the state memo."""
        super().load(data)
        if self.remember_states:
            self.memo = state_memo.for_game(source, data["pddl_problem"])
            stock = self._logic.grammar.derive
            self._logic.grammar.derive = lambda start, context={}: self._derive(stock, start,
                                                                                context)

    def reset(self):
        if self.memo is None:
            return super().reset()
        self._state_number, self._came_from = self.memo.start, None
        state = super().reset()
        self.memo.start = self._state_number
        return state

    def step(self, command: str):
        """``PddlEnv.step``; a valid command moves the state number along a transition seen
        before, or leaves it unknown until ``_number`` reads the state it led to."""
        if self.memo is not None:
            commands = self.state["_valid_commands"]
            if command.strip() in commands:
                action = self.state["_valid_actions"][commands.index(command.strip())]
                self._came_from = (self._number(), action.id)
                self._state_number = self.memo.transitions.get(self._came_from)
        return super().step(command)

    def _number(self) -> int:
        """The current state's number, read from the planner when no transition gave it."""
        if self._state_number is None:
            self._state_number = self.memo.number(self.downward_lib, self._pddl_state)
            if self._came_from is not None:
                self.memo.transitions[self._came_from] = self._state_number
        return self._state_number

    def _derive(self, stock, start: str, context: dict) -> str:
        """The grammar's ``derive``, remembered per state, text and action arguments (the
        intro and each step's feedback); the command texts ``_gather_infos`` derives on a
        state met for the first time are kept in its ``StateInfos`` instead."""
        if self._gathering:
            return stock(start, context)
        key = (self._number(), start, frozenset(context.get("mapping", {}).items()))
        text = self.memo.texts.get(key)
        if text is None:
            text = self.memo.texts[key] = stock(start, context)
        return text

    def _gather_infos(self) -> None:
        """``PddlEnv._gather_infos``, its derived entries taken from the state's
        ``StateInfos`` on a state met before (state_memo.py)."""
        if self.memo is None:
            return super()._gather_infos()
        number = self._number()
        infos = self.memo.infos.get(number)
        if infos is None:
            self._gathering = True
            try:
                super()._gather_infos()
            finally:
                self._gathering = False
            self.memo.remember(number, self.state, self.request_infos.facts,
                               self._pddl_state._operators)
            return None
        state = self.state
        state["command_templates"] = sorted({a.template for a in self._logic.actions.values()})
        state["won"], state["lost"] = infos.won, False
        state["_entity_infos"] = dict(self._entity_infos)
        state["_facts"] = list(infos.facts)
        if self.request_infos.facts:
            state["facts"] = list(infos.readable_facts)
        state["last_action"], state["_last_action"] = None, self._last_action
        state["_valid_actions"] = list(infos.actions)
        state["_valid_commands"] = list(infos.commands)
        state["admissible_commands"] = list(infos.admissible)
        if self.request_infos.moves:
            state["moves"] = self._moves
        self._pddl_state._operators = self.memo.operators
        return None


class _Engine:
    """A TextWorld PDDL environment with a copy of the planner library to itself.

    The copy comes from the spare ones when there is one and goes back to them on
    ``release`` or when the engine is garbage-collected, so a process holds as
    many copies as it has engines at once. An engine plays one game at a time:
    ``load`` replaces the game in it.
    """

    def __init__(self, planner: bool, remember_states: bool = False):
        infos = textworld.EnvInfos(admissible_commands=True, facts=True, won=True,
                                   policy_commands=planner)
        lib = _SPARE_PLANNERS.pop() if _SPARE_PLANNERS else fast_downward.load_lib()
        self.env = _PlannerEnv(infos, lib, remember_states)
        self.release = weakref.finalize(self, _SPARE_PLANNERS.append, lib)
        self.game: str | None = None
        """The source (path) of the game loaded, None before a load or after a failed one."""

    def load(self, data: dict, source: str) -> None:
        """Load a ``game.tw-pddl`` dict in place of the current game (``source`` names it)."""
        self.game = None
        try:
            self.env.load(data, source)
        except Exception as err:  # the PDDL translator raises many types on a bad problem
            raise GameFileError(f"game {source} does not load in TextWorld: {err}") from err
        names = Demangler(game_infos=self.env._entity_infos)
        for info in self.env._entity_infos.values():
            info.name = names.demangle_alfred_name(info.id).strip()
        self.game = source


def plan_game(game: dict) -> list[str] | None:
    """The planner's solution of an in-memory game, or None when it is unsolvable,
    already won at the start, or the plan does not reach the goal when replayed."""
    engine = _Engine(planner=True)
    try:
        engine.load(game, "<generated>")
        state = engine.env.reset()
        if state["won"]:
            return None
        plan = list(state["policy_commands"] or [])
        for command in plan:
            state, _, _ = engine.env.step(command)
        return plan if plan and state["won"] else None
    finally:
        engine.release()


class AlfWorldEnv:
    """ALFWorld through the agentcredit protocol (``envs.base.Environment``).

    Each instance holds one TextWorld engine (one copy of the planner library,
    taken at the first ``reset`` and given back on ``close`` or garbage collection)
    and loads a task's game into it when the task changes (~0.1 s); resetting on
    the same game again does not reload it.

    Args:
        memoize: cache TextWorld's grammar parsing (``grammar_memo``) and what it derives from
            each state met (``state_memo``): the same results, faster steps.
    """

    name = "alfworld"

    def __init__(self, memoize: bool = True):
        if memoize:
            grammar_memo.enable()
        else:
            grammar_memo.disable()
        self._memoize = memoize
        self._engine: _Engine | None = None
        self._state: Any = None
        self._task: Task | None = None

    def close(self) -> None:
        """Give back this environment's copy of the planner library now (a later
        ``reset`` takes one again)."""
        if self._engine is not None:
            self._engine.release()
        self._engine, self._state, self._task = None, None, None

    def _load(self, task: Task) -> _Engine:
        path = _game_path(task)
        key = str(Path(path).resolve())
        if self._engine is None:
            self._engine = _Engine(planner=False, remember_states=self._memoize)
        if self._engine.game != key:
            self._state = None
            self._engine.load(read_game_file(path), key)
        return self._engine

    def reset(self, task: Task) -> Observation:
        engine = self._load(task)
        self._task = task
        self._state = engine.env.reset()
        return Observation(_clean_feedback(self._state.feedback), self.admissible_actions())

    def _require_reset(self) -> None:
        if self._state is None:
            raise RuntimeError("call reset(task) before stepping the ALFWorld environment")

    def admissible_actions(self) -> tuple[str, ...]:
        self._require_reset()
        return tuple(self._state["admissible_commands"])

    def step(self, action_text: str) -> tuple[Observation, float, bool, StepInfo]:
        self._require_reset()
        won = bool(self._state["won"])
        command = action_text.strip() if isinstance(action_text, str) else None
        if won or command not in self._state["admissible_commands"]:
            obs = Observation(NOTHING_HAPPENS, self.admissible_actions())
            return obs, float(won), won, StepInfo(valid=False, won=won)
        self._state, _, _ = self._engine.env.step(command)
        won = bool(self._state["won"])
        obs = Observation(_clean_feedback(self._state.feedback), self.admissible_actions())
        return obs, float(won), won, StepInfo(valid=True, won=won)

    def facts(self) -> frozenset[str]:
        """The positive PDDL facts of the current state, as ``pred(arg, ...)`` strings."""
        self._require_reset()
        return frozenset(_fact_text(f) for f in self._state["facts"]
                         if not f.name.startswith(("not_", "new-axiom@")))

    def snapshot(self) -> dict[str, Any]:
        return dict.fromkeys(sorted(self.facts()), True)

    def expert(self, task: Task) -> list[str]:
        game = read_game_file(_game_path(task))
        if game.get("walkthrough"):
            return list(game["walkthrough"])
        planned = plan_game(game)
        if planned is None:
            raise RuntimeError(f"the planner finds no solution for task {task.task_id!r}")
        return planned

    def demonstration(self, task: Task) -> list[str]:
        """Actions of a won episode that use only what the agent can observe (the SFT data).

        ``expert`` is the planner's plan on the full state: it walks straight to the
        hidden target, which a cloned policy can only guess. This searches instead
        (``envs.alfworld.expert.demonstrate``), falling back to ``expert`` on a game its
        rules do not win. Plays the game in this environment: reset before stepping.
        """
        return demonstrate(self, task) or self.expert(task)

    def labelled_demonstration(self, task: Task, rng: random.Random,
                               noise: float) -> tuple[list[str], list[str]]:
        """``(actions, labels)`` of a won episode: ``demonstration`` with random tie-breaks
        and, with probability ``noise`` per step, a random command played instead of the
        demonstrator's, which stays the step's label (``envs.alfworld.expert``,
        ``noisy_demonstration``). Falls back to the planner's plan, labels = actions, on a
        game the rules do not win."""
        played = noisy_demonstration(self, task, rng, noise)
        if played is None:
            plan = self.expert(task)
            return plan, list(plan)
        return played

    def verifier(self, task: Task):
        return build_verifier(task, read_game_file(task.payload["game_file"]))
