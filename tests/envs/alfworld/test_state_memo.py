"""The ALFWorld state memo (envs/alfworld/state_memo.py): a state is the planner's atoms and
TextWorld's fact set together, numbers are never reused, replayed transitions read nothing,
and an engine that remembers plays exactly as one that does not."""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from agentcredit.envs.alfworld import state_memo
from agentcredit.envs.alfworld.engine import AlfWorldEnv
from agentcredit.envs.alfworld.state_memo import StateMemo


@pytest.fixture(autouse=True)
def _no_memo_from_other_tests(monkeypatch):
    monkeypatch.setattr(state_memo, "_GAMES", OrderedDict())


class _Library:
    """A planner library whose state is a list of atom texts."""

    def __init__(self, atoms: list[str]):
        self.atoms = atoms

    def get_state_size(self) -> int:
        return len(self.atoms)

    def get_state(self, buffer) -> None:
        for slot, text in zip(buffer, self.atoms, strict=True):
            slot._name = text.encode()


class _Facts:
    def __init__(self, facts: set[str]):
        self.facts = facts


def test_a_state_is_the_planners_atoms_and_the_fact_set_together():
    library = _Library(["Atom ison(lamp)", "Atom at(agent, desk)"])
    memo = StateMemo()
    lit = memo.number(library, _Facts({"ison(lamp)"}))
    assert memo.number(library, _Facts({"ison(lamp)"})) == lit
    library.atoms = ["NegatedAtom ison(lamp)", "Atom at(agent, desk)"]
    switched_off = memo.number(library, _Facts({"ison(lamp)"}))  # the fact set still says lit
    assert switched_off != lit
    # same atoms, other facts
    assert memo.number(library, _Facts(set())) not in (lit, switched_off)
    assert memo.reads == 4


def test_past_the_states_kept_everything_is_forgotten_and_no_number_comes_back(monkeypatch):
    monkeypatch.setattr(state_memo, "STATES_KEPT", 2)
    library = _Library(["a"])
    memo = StateMemo()
    numbers = []
    for text in ("a", "b", "c", "a"):
        library.atoms = [text]
        numbers.append(memo.number(library, _Facts(set())))
        memo.transitions[(numbers[-1], 0)] = numbers[-1]
    assert len(set(numbers)) == 4  # "a" met again after the forgetting is a new number
    assert len(memo.numbers) == 2 and len(memo.transitions) == 2


def test_the_process_keeps_one_memo_per_game_text_for_the_last_games_loaded(monkeypatch):
    monkeypatch.setattr(state_memo, "GAMES_KEPT", 2)
    first = state_memo.for_game("a.tw-pddl", "(problem a)")
    assert state_memo.for_game("a.tw-pddl", "(problem a)") is first
    assert state_memo.for_game("a.tw-pddl", "(problem b)") is not first  # rewritten in place
    state_memo.for_game("c.tw-pddl", "(problem c)")
    assert state_memo.for_game("a.tw-pddl", "(problem a)") is not first  # dropped, oldest


def test_a_second_engine_on_the_game_replays_the_first_ones_walk_without_a_read(
        games_by_type):
    task = games_by_type["pick_clean_then_place"][0]
    first, second = AlfWorldEnv(), AlfWorldEnv()
    walk = _walks(first, task, 2, 15)
    memo = first._engine.env.memo
    reads = memo.reads
    assert _walks(second, task, 2, 15) == walk
    assert second._engine.env.memo is memo and memo.reads == reads


def _walks(env: AlfWorldEnv, task, episodes: int, steps: int) -> list:
    trace = []
    for episode in range(episodes):
        rng = random.Random(episode % 3)  # walks that retrace each other
        obs = env.reset(task)
        trace.append((obs, env.snapshot()))
        for _ in range(steps):
            obs, reward, done, info = env.step(rng.choice(obs.admissible_actions + ("bad",)))
            trace.append((obs, reward, done, info, env.snapshot()))
            if done:
                break
    return trace


def _forgetful() -> AlfWorldEnv:
    """The grammar memo alone (itself held equal to stock TextWorld in test_grammar_memo)."""
    env = AlfWorldEnv()
    env._memoize = False
    return env


def test_a_remembering_engine_plays_exactly_as_a_forgetful_one(games_by_type):
    for task_type in ("look_at_obj_in_light", "pick_heat_then_place", "pick_two_obj_and_place"):
        task = games_by_type[task_type][0]
        remembering = AlfWorldEnv()
        assert _walks(remembering, task, 9, 20) == _walks(_forgetful(), task, 9, 20), task_type
        memo = remembering._engine.env.memo
        assert memo.infos and memo.texts
        # a read records the transition that led to it; retraced walks reuse them
        assert len(memo.transitions) <= memo.reads < 0.5 * 9 * 21


def test_a_lamp_switched_twice_is_a_state_of_its_own_and_a_replay_reads_nothing(
        games_by_type):
    task = games_by_type["look_at_obj_in_light"][0]
    env = AlfWorldEnv()
    lamp = next(a for a in env.expert(task) if a.startswith("use "))
    table = env.expert(task)[env.expert(task).index(lamp) - 1]  # the lamp's place

    def play() -> list[int]:
        env.reset(task)
        env.step(table)
        numbers = []
        for _ in range(3):
            env.step(lamp)
            numbers.append(env._engine.env._state_number)
        return numbers

    once, twice, thrice = play()
    assert once != twice and thrice == once
    reads = env._engine.env.memo.reads
    assert play() == [once, twice, thrice]
    assert env._engine.env.memo.reads == reads



def test_a_derived_text_is_remembered_per_state_grammar_text_and_action_arguments(
        games_by_type):
    env = AlfWorldEnv()
    env.reset(games_by_type["pick_and_place"][0])
    engine = env._engine.env
    calls = []

    def grammar(start, context):
        calls.append(start)
        return f"{start} {sorted(context['mapping'].values())}"

    def derive(start: str, argument: str) -> str:
        return engine._derive(grammar, start, {"mapping": {"o": argument}})

    assert derive("#take#", "apple") == derive("#take#", "apple") == "#take# ['apple']"
    assert derive("#take#", "egg") == "#take# ['egg']"
    assert derive("#drop#", "egg") == "#drop# ['egg']"
    assert len(calls) == 3
    env.step(env.admissible_actions()[0])  # another state: derived afresh
    assert derive("#take#", "apple") == "#take# ['apple']" and len(calls) == 4
