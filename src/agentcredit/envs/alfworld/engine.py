"""The real ALFWorld engine: TextWorld's ``PddlEnv`` on ALFRED's domain and grammar.

``AlfWorldEnv`` speaks the agentcredit environment protocol. Entity names are
demangled with ALFWorld's own ``Demangler`` (``Egg_bar__plus_01...`` -> ``egg 1``),
the expert is the Fast Downward plan stored as the game's walkthrough (replanned
from the start state when a game has none), and the state snapshot is the set of
positive PDDL facts after each step (``not_*`` entries dropped), as
``{"ishot(egg 1)": True, ...}``.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import textworld
from alfworld.agents.utils.misc import Demangler
from textworld.envs.pddl import PddlEnv

from agentcredit.envs.alfworld import grammar_memo
from agentcredit.envs.base import Observation, StepInfo, Task

NOTHING_HAPPENS = "Nothing happens."
_WELCOME = "-= Welcome to TextWorld, ALFRED! =-"
_GAME_KEYS = ("pddl_domain", "grammar", "pddl_problem")


class GameFileError(ValueError):
    """A game file is missing, unreadable or not an ALFWorld ``game.tw-pddl``."""


def read_game_file(path: str | Path) -> dict:
    """Load and check a ``game.tw-pddl`` file; errors name the file and the problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise GameFileError(f"game file not found: {path}") from err
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise GameFileError(f"game file {path} is not valid JSON ({err}); regenerate it "
                            "or delete its folder so the generator rebuilds it") from err
    missing = [k for k in _GAME_KEYS if not isinstance(data, dict) or k not in data]
    if missing:
        raise GameFileError(f"game file {path} lacks {missing}; it is not an ALFWorld "
                            "game.tw-pddl file")
    return data


def _fact_text(fact: Any) -> str:
    return f"{fact.name}({', '.join(v.name for v in fact.arguments)})"


def _clean_feedback(text: str) -> str:
    return text.replace(_WELCOME, "").strip()


class _LoadedGame:
    """One game loaded into its own ``PddlEnv`` (each owns a copy of the planner library)."""

    def __init__(self, data: dict, source: str, planner: bool):
        infos = textworld.EnvInfos(admissible_commands=True, facts=True, won=True,
                                   policy_commands=planner)
        self.env = PddlEnv(infos)
        try:
            self.env.load(data)
        except Exception as err:  # the PDDL translator raises many types on a bad problem
            raise GameFileError(f"game {source} does not load in TextWorld: {err}") from err
        names = Demangler(game_infos=self.env._entity_infos)
        for info in self.env._entity_infos.values():
            info.name = names.demangle_alfred_name(info.id).strip()
        self.walkthrough = list(data.get("walkthrough") or [])


def plan_game(game: dict) -> list[str] | None:
    """The planner's solution of an in-memory game, or None when it is unsolvable,
    already won at the start, or the plan does not reach the goal when replayed."""
    loaded = _LoadedGame(game, "<generated>", planner=True)
    state = loaded.env.reset()
    if state["won"]:
        return None
    plan = list(state["policy_commands"] or [])
    for command in plan:
        state, _, _ = loaded.env.step(command)
    return plan if plan and state["won"] else None


class AlfWorldEnv:
    """ALFWorld through the agentcredit protocol (``envs.base.Environment``).

    Args:
        memoize_grammar: cache TextWorld's grammar parsing (same results, ~4x faster steps).
        max_loaded_games: loaded games kept in memory (LRU); reloading costs ~0.25 s.
    """

    name = "alfworld"

    def __init__(self, memoize_grammar: bool = True, max_loaded_games: int = 64):
        if memoize_grammar:
            grammar_memo.enable()
        else:
            grammar_memo.disable()
        self.max_loaded_games = max_loaded_games
        self._games: OrderedDict[str, _LoadedGame] = OrderedDict()
        self._game: _LoadedGame | None = None
        self._state: Any = None
        self._task: Task | None = None

    def _load(self, task: Task) -> _LoadedGame:
        path = task.payload.get("game_file")
        if not path:
            raise GameFileError(f"task {task.task_id!r} has no payload['game_file']")
        key = str(Path(path).resolve())
        if key in self._games:
            self._games.move_to_end(key)
            return self._games[key]
        game = _LoadedGame(read_game_file(path), key, planner=False)
        self._games[key] = game
        while len(self._games) > self.max_loaded_games:
            self._games.popitem(last=False)
        return game

    def reset(self, task: Task) -> Observation:
        self._game = self._load(task)
        self._task = task
        self._state = self._game.env.reset()
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
        self._state, _, _ = self._game.env.step(command)
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
        game = self._load(task)
        if game.walkthrough:
            return list(game.walkthrough)
        planned = plan_game(read_game_file(task.payload["game_file"]))
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
        from agentcredit.envs.alfworld.expert import demonstrate

        return demonstrate(self, task) or self.expert(task)

    def verifier(self, task: Task):
        from agentcredit.envs.alfworld.verifier import build_verifier

        return build_verifier(task, read_game_file(task.payload["game_file"]))
