"""Remember what TextWorld derives from each ALFWorld state, so a state met again costs a few
dictionary reads instead of a pass of the grammar.

After every step TextWorld's ``PddlEnv`` rebuilds the state's information
(``_gather_infos``: the command text of every applicable action, from the grammar, and every
fact made human-readable) and derives the step's feedback text from the grammar. With the
grammar memo on, that is most of a step (a credit-regimes cell on ALFWorld spent 319 of its
427 s of engine steps in ``_gather_infos``). Both are pure functions of the game's state: the
grammar takes the first applicable rule of a symbol, with no random choice, and reads the
state, the entities and the action's arguments. Continuations from one state (the credit
check's Monte Carlo truth), a group's rollouts of one game and the demonstrator's searches
meet the same states again and again.

A state is two things in TextWorld, and a state here is the pair: the planner library's state
(Fast Downward's atoms, one per SAS variable: what decides the applicable actions and the
goal) and ``PddlState``'s own set of facts (what the grammar's conditions and the reported
facts read). Neither is a function of the other: a fact an action switches off stays in
``PddlState``'s set while the planner's atom turns negative (``use floorlamp 1`` twice), so
either alone would merge states TextWorld tells apart.

Reading the planner's state costs more than the rest of a remembered step (~0.6 ms: the
library formats every atom), so each distinct state gets a number once, and the memo keeps the
transitions between numbers: a reset leads to the game's start, and applying an operator to a
state leads where it led before (both parts of a state change only through the operator's
effects, which are a function of the state). Only a transition not seen yet reads the planner.

A remembered state holds little of its own: its key is what differs from the first state read
in the game (a few atoms and facts), and the actions, facts, texts and operators it lists are
shared with every other state that lists them. One memo serves every engine of the process
that plays the game (``for_game``: a group's rollouts, each on its own engine, start from the
same states), since nothing in it belongs to one planner library: atom texts, operator ids and
actions come from the game's translation, which is the same for all.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass
from itertools import count
from typing import Any

from fast_downward.interface import Atom

STATES_KEPT = 8192
"""Distinct states remembered per game; past it the game's states are forgotten and met anew
(a state holds ~8 KB: at most ~65 MB a game)."""
GAMES_KEPT = 8
"""Games whose memo the process keeps, the least recently loaded dropped first."""


@dataclass(frozen=True)
class StateInfos:
    """What ``PddlEnv._gather_infos`` derives from one state (TextWorld's ``state`` entries
    of the same names).

    Attributes:
        won: the goal holds.
        facts: ``PddlState``'s facts (``_facts``).
        readable_facts: the same facts with entity names (``facts``; None when not asked).
        actions: the applicable actions (``_valid_actions``), their command text derived.
        commands: each action's command (``_valid_commands``).
        admissible: the distinct commands, sorted (``admissible_commands``).
    """

    won: bool
    facts: tuple
    readable_facts: tuple | None
    actions: tuple
    commands: tuple[str, ...]
    admissible: tuple[str, ...]


@dataclass(frozen=True)
class Operator:
    """What ``PddlState.apply`` reads of a planner operator (TextWorld's ``_operators``
    values are views into a ctypes array of 1 KB names, which they would keep alive)."""

    id: int
    nb_effect_atoms: int


_NUMBERS = count()
"""State numbers, never reused (not even across games or a forgetting), so a number a caller
still holds can only miss."""


class StateMemo:
    """One game's states, numbered, with the transitions between them, their ``StateInfos``
    and the texts derived on them.

    Attributes:
        start: the number of the state every reset of the game starts from, once read.
        transitions: ``(state, operator id)`` -> the state applying it led to.
        infos: state -> its ``StateInfos``.
        texts: ``(state, grammar text, action arguments)`` -> the derived text.
        operators: every planner operator an action of a remembered state applies through,
            by id (the library's own numbering, fixed for the game).
        reads: how many times the planner's state was read (a transition not seen yet).
    """

    def __init__(self) -> None:
        self.start: int | None = None
        self.numbers: dict[tuple, int] = {}
        self.transitions: dict[tuple[int, int], int] = {}
        self.infos: dict[int, StateInfos] = {}
        self.texts: dict[tuple, str] = {}
        self.operators: dict[int, Operator] = {}
        self.reads = 0
        self._first: tuple[tuple[bytes, ...], frozenset] | None = None
        self._shared: dict[Any, Any] = {}  # one object per equal action or fact

    def clear(self) -> None:
        """Forget every state."""
        self.start = None
        self.numbers.clear()
        self.transitions.clear()
        self.infos.clear()
        self.texts.clear()
        self.operators.clear()
        self._first = None
        self._shared.clear()

    def number(self, downward_lib: Any, pddl_state: Any) -> int:
        """The number of the current state, read from the planner library holding it and
        ``pddl_state`` (a new number for a state not met before; past ``STATES_KEPT`` states,
        every state is forgotten first)."""
        self.reads += 1
        atoms = (Atom * downward_lib.get_state_size())()
        downward_lib.get_state(atoms)
        planner, facts = tuple(atom._name for atom in atoms), frozenset(pddl_state.facts)
        if self._first is None:
            self._first = planner, facts
        first_planner, first_facts = self._first
        key = (tuple((i, name) for i, (name, was) in enumerate(zip(planner, first_planner,
                                                                    strict=True)) if name != was),
               facts - first_facts, first_facts - facts)
        number = self.numbers.get(key)
        if number is None:
            if len(self.numbers) >= STATES_KEPT:
                first = self._first
                self.clear()
                self._first = first
            number = self.numbers[key] = next(_NUMBERS)
        return number

    def remember(self, number: int, state: Any, readable: bool, operators: dict) -> None:
        """Keep TextWorld's ``state`` entries that ``_gather_infos`` derived on state
        ``number`` (``readable``: with the human-readable facts), and the operators of
        ``PddlState._operators``, sharing every equal action, fact and text."""
        share = self._shared.setdefault
        actions = tuple(share((a.id, a.command_template), a) for a in state["_valid_actions"])
        self.infos[number] = StateInfos(
            won=state["won"], facts=tuple(state["_facts"]),
            readable_facts=tuple(share(f, f) for f in state["facts"]) if readable else None,
            actions=actions, commands=tuple(sys.intern(c) for c in state["_valid_commands"]),
            admissible=tuple(sys.intern(c) for c in state["admissible_commands"]))
        for i, op in operators.items():
            if i not in self.operators:
                self.operators[i] = Operator(op.id, op.nb_effect_atoms)


_GAMES: OrderedDict[tuple[str, str], StateMemo] = OrderedDict()


def for_game(source: str, problem: str) -> StateMemo:
    """The process's memo of the game at ``source`` whose PDDL problem is ``problem`` (the
    text, so a game file rewritten in place gets a memo of its own); the last ``GAMES_KEPT``
    games' memos are kept."""
    key = (source, problem)
    memo = _GAMES.get(key)
    if memo is None:
        memo = _GAMES[key] = StateMemo()
        if len(_GAMES) > GAMES_KEPT:
            _GAMES.popitem(last=False)
    _GAMES.move_to_end(key)
    return memo
