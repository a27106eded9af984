"""The ALFWorld state memo (envs/alfworld/state_memo.py): a state is the planner's atoms and
TextWorld's fact set together, numbers are never reused, replayed transitions read nothing,
and an engine that remembers plays exactly as one that does not."""

from __future__ import annotations

import random

from agentcredit.envs.alfworld import state_memo
from agentcredit.envs.alfworld.engine import AlfWorldEnv
from agentcredit.envs.alfworld.state_memo import StateMemo


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
    memo = StateMemo(library)
    lit = memo.number(_Facts({"ison(lamp)"}))
    assert memo.number(_Facts({"ison(lamp)"})) == lit
    library.atoms = ["NegatedAtom ison(lamp)", "Atom at(agent, desk)"]
    switched_off = memo.number(_Facts({"ison(lamp)"}))  # the fact set still says lit
    assert switched_off != lit
    assert memo.number(_Facts(set())) not in (lit, switched_off)  # same atoms, other facts
    assert memo.reads == 4


def test_past_the_states_kept_everything_is_forgotten_and_no_number_comes_back(monkeypatch):
    monkeypatch.setattr(state_memo, "STATES_KEPT", 2)
    library = _Library(["a"])
    memo = StateMemo(library)
    numbers = []
    for text in ("a", "b", "c", "a"):
        library.atoms = [text]
        numbers.append(memo.number(_Facts(set())))
        memo.transitions[(numbers[-1], 0)] = numbers[-1]
    assert len(set(numbers)) == 4  # "a" met again after the forgetting is a new number
    assert len(memo.numbers) == 2 and len(memo.transitions) == 2


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
