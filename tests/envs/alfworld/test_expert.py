"""The search demonstrator wins using only what the agent observes."""

from __future__ import annotations

import random
import re

import pytest

from agentcredit.envs.alfworld import engine, expert
from agentcredit.envs.alfworld.game_file import read_game_file
from agentcredit.envs.alfworld.tasks import TASK_TYPES
from agentcredit.envs.alfworld.verifier import read_game_facts


def _replay(env, task, actions):
    """(observation before each action, admissible before each action, won) of a replay."""
    obs = env.reset(task)
    seen, admissible, won = [], [], False
    for action in actions:
        seen.append(obs.text)
        admissible.append(obs.admissible_actions)
        obs, _, _, info = env.step(action)
        assert info.valid, f"{task.task_id}: {action!r} is not admissible"
        won = info.won
    return seen + [obs.text], admissible, won


def _names(text: str, names) -> bool:
    return any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", text) for n in names)


#: the tie-break between equally good receptacles: list order, or random with a seed
TIES = {"list order": None, "random": 3}


def _rng(seed):
    return None if seed is None else random.Random(seed)


@pytest.mark.parametrize("ties", TIES.values(), ids=TIES.keys())
@pytest.mark.parametrize("task_type", sorted(TASK_TYPES))
def test_the_search_demonstration_wins_every_task_type(env, games_by_type, task_type, ties):
    for task in games_by_type[task_type]:
        actions = expert.demonstrate(env, task, rng=_rng(ties))
        assert actions is not None, f"the search rules do not win {task.task_id}"
        assert _replay(env, task, actions)[2]


@pytest.mark.parametrize("ties", TIES.values(), ids=TIES.keys())
@pytest.mark.parametrize("task_type", sorted(TASK_TYPES))
def test_no_receptacle_is_visited_twice_before_a_target_is_seen(env, games_by_type, task_type,
                                                                 ties):
    for task in games_by_type[task_type]:
        targets = read_game_facts(task_type, read_game_file(task.payload["game_file"])
                                  ["pddl_problem"]).targets
        actions = expert.demonstrate(env, task, rng=_rng(ties))
        observations, _, _ = _replay(env, task, actions)
        visits, looks = [], []
        for action, after in zip(actions, observations[1:], strict=True):
            verb, _, receptacle = action.partition(" ")
            assert verb in ("go", "open", "examine"), f"{task.task_id}: {action!r} while searching"
            (visits if verb == "go" else looks).append(receptacle)
            if _names(after, targets):
                break
        assert len(visits) == len(set(visits)) and len(looks) == len(set(looks)), task.task_id


def _first_move_candidates(env, task) -> list[str]:
    """The ``go to`` actions of the receptacles that can hold the target and are not of the
    goal's type, in list order (from the game's type facts, independently of the rules)."""
    obs = env.reset(task)
    facts = env.snapshot()
    target = read_game_facts(task.task_type, read_game_file(task.payload["game_file"])
                             ["pddl_problem"]).targets[0]
    otype = next(f.split(", ")[1][:-1] for f in facts if f.startswith(f"objecttype({target},"))
    holders = {f.split("(")[1].split(",")[0] for f in facts
               if f.startswith("receptacletype(")
               and f"cancontain({f.split(', ')[1][:-1]}, {otype})" in facts}
    goal = read_game_facts(task.task_type, read_game_file(task.payload["game_file"])
                           ["pddl_problem"]).goal_receptacles
    return [a for a in obs.admissible_actions
            if a.startswith("go to ") and a[6:] in holders - set(goal)]


def test_the_first_move_is_the_first_listed_receptacle_that_can_hold_the_target(
        env, games_by_type):
    for task in games_by_type["pick_and_place"]:
        assert expert.demonstrate(env, task)[0] == _first_move_candidates(env, task)[0]


def test_a_random_tie_break_first_searches_any_receptacle_that_can_hold_the_target(
        env, games_by_type):
    spread = 0
    for task in games_by_type["pick_and_place"]:
        candidates = _first_move_candidates(env, task)
        firsts = {expert.demonstrate(env, task, rng=random.Random(seed))[0] for seed in range(8)}
        assert firsts <= set(candidates), task.task_id
        spread += len(candidates) > 2 and len(firsts) > 1
    assert spread, "no game with three candidates got two different first moves in 8 seeds"


def test_a_game_the_rules_cannot_win_falls_back_to_the_planner(env, games_by_type, monkeypatch):
    task = games_by_type["pick_heat_then_place"][0]
    monkeypatch.setattr(engine, "demonstrate", lambda env, task: None)
    assert env.demonstration(task) == env.expert(task)


@pytest.mark.parametrize("task_type", sorted(TASK_TYPES))
def test_a_noisy_demonstration_is_won_and_labels_the_experts_admissible_choice(
        env, games_by_type, task_type):
    noisy = 0
    for task in games_by_type[task_type]:
        played = expert.noisy_demonstration(env, task, random.Random(task.task_id), 0.3)
        assert played is not None, f"the demonstrator does not recover in {task.task_id}"
        actions, labels = played
        _, admissible, won = _replay(env, task, actions)
        assert won and len(labels) == len(actions)
        assert all(label in options for label, options in zip(labels, admissible, strict=True))
        noisy += sum(a != b for a, b in zip(actions, labels, strict=True))
    assert noisy, "noise 0.3 played no random command"


class _Mistakes:
    """An rng stand-in for ``noisy_demonstration`` at noise 1: at step ``t`` in ``mistakes``
    it plays ``mistakes[t](commands)``, elsewhere the demonstrator's label; ties go to the
    first candidate, as without an rng."""

    def __init__(self, mistakes):
        self.mistakes, self.step, self.pending = mistakes, -1, None

    def random(self):
        self.step += 1
        self.pending = self.mistakes.get(self.step)
        return 0.0 if self.pending else 1.0

    def choice(self, seq):
        pick, self.pending = self.pending, None
        return seq[0] if pick is None else pick(seq)


def _targets(task):
    return read_game_facts(task.task_type, read_game_file(task.payload["game_file"])
                           ["pddl_problem"])


def test_after_taking_a_wrong_object_the_label_puts_it_back_down(env, games_by_type):
    checked = 0
    for task in games_by_type["pick_and_place"] + games_by_type["pick_cool_then_place"]:
        targets = _targets(task).targets
        clean = expert.demonstrate(env, task)
        _, admissible, _ = _replay(env, task, clean)
        wrong = [[c for c in options if c.startswith("take ")
                  and c.removeprefix("take ").split(" from ")[0] not in targets]
                 for options in admissible]
        step = next((t for t, takes in enumerate(wrong) if takes), None)
        if step is None:
            continue
        take = wrong[step][0]
        actions, labels = expert.noisy_demonstration(
            env, task, _Mistakes({step: lambda commands, take=take: take}), 1.0)
        obj, where = take.removeprefix("take ").split(" from ")
        assert actions[step] == take and labels[step] == clean[step]
        assert labels[step + 1] == f"move {obj} to {where}", task.task_id
        assert _replay(env, task, actions)[2]
        checked += 1
    assert checked, "no game offered a wrong object to take"


def test_a_target_put_down_elsewhere_is_fetched_from_there(env, games_by_type):
    checked = 0
    for task in games_by_type["pick_and_place"] + games_by_type["pick_heat_then_place"]:
        facts = _targets(task)
        clean = expert.demonstrate(env, task)
        taken = next(t for t, a in enumerate(clean) if a.startswith("take "))
        target = clean[taken].removeprefix("take ").split(" from ")[0]
        here = clean[taken].split(" from ")[1]
        elsewhere = []

        def carry(commands, here=here, facts=facts, elsewhere=elsewhere):
            elsewhere.append(next(c.removeprefix("go to ") for c in commands
                                  if c.startswith("go to ") and c[6:] != here
                                  and c[6:] not in facts.goal_receptacles))
            return f"go to {elsewhere[0]}"

        def put_down(commands, target=target, elsewhere=elsewhere):  # a closed one takes nothing
            move = f"move {target} to {elsewhere[0]}"
            return move if move in commands else commands[0]

        actions, labels = expert.noisy_demonstration(
            env, task, _Mistakes({taken + 1: carry, taken + 2: put_down}), 1.0)
        if actions[taken + 2] != f"move {target} to {elsewhere[0]}":
            continue
        assert labels[taken + 3:taken + 4] in ([f"take {target} from {elsewhere[0]}"],
                                                [f"open {elsewhere[0]}"]), task.task_id
        assert _replay(env, task, actions)[2]
        checked += 1
    assert checked, "no game let the target be put down elsewhere"


def test_a_wrong_object_carried_to_a_closed_receptacle_is_put_down_after_opening_it(
        env, games_by_type):
    checked = 0
    for task in [g for games in games_by_type.values() for g in games]:
        targets = _targets(task).targets
        clean = expert.demonstrate(env, task)
        _, admissible, _ = _replay(env, task, clean)
        step = next((t for t, options in enumerate(admissible) for c in options
                     if c.startswith("take ")
                     and c.removeprefix("take ").split(" from ")[0] not in targets), None)
        if step is None:
            continue
        take = next(c for c in admissible[step] if c.startswith("take ")
                    and c.removeprefix("take ").split(" from ")[0] not in targets)
        closed = [c for c in admissible[step] if c.startswith("go to ")
                  and c.split()[2] in ("drawer", "cabinet", "fridge", "microwave", "safe")]
        for go in closed:
            actions, labels = expert.noisy_demonstration(env, task, _Mistakes(
                {step: lambda commands, take=take: take,
                 step + 1: lambda commands, go=go: go}), 1.0)
            arrived = _replay(env, task, actions)[0][step + 2]
            if "is closed" not in arrived:
                continue
            obj = take.removeprefix("take ").split(" from ")[0]
            where = go.removeprefix("go to ")
            source = take.split(" from ")[1]
            assert labels[step + 2] == f"open {where}"
            # put down here, or back where it came from when this receptacle cannot hold it
            assert labels[step + 3] in (f"move {obj} to {where}", f"go to {source}")
            checked += 1
            break
    assert checked, "no game had a closed receptacle to carry a wrong object to"


def _taken(actions):
    """The step that takes the target and the target's name."""
    step = next(t for t, a in enumerate(actions) if a.startswith("take "))
    return step, actions[step].removeprefix("take ").split(" from ")[0]


def test_a_transformation_of_the_wrong_kind_is_not_recorded_as_done(env, games_by_type):
    checked = 0
    for task in games_by_type["pick_heat_then_place"]:
        step, target = _taken(expert.demonstrate(env, task))

        def to_fridge(commands):
            return next((c for c in commands if c.startswith("go to fridge")), commands[0])

        def cool(commands, target=target):  # the policy cools what the task wants heated
            return next((c for c in commands if c.startswith(f"cool {target} with")),
                        commands[0])

        played = expert.noisy_demonstration(
            env, task, _Mistakes({step + 1: to_fridge, step + 2: cool}), 1.0)
        assert played is not None, f"{task.task_id}: the demonstrator stalls after a cool"
        actions, labels = played
        if not actions[step + 2].startswith(f"cool {target} with"):
            continue
        # it still heats the target before putting it in place
        later = labels[step + 3:]
        heat = next(t for t, a in enumerate(later) if a.startswith(f"heat {target} with"))
        assert not any(a.startswith(f"move {target} to ") for a in later[:heat]), task.task_id
        assert _replay(env, task, actions)[2]
        checked += 1
    assert checked, "no heat game had a fridge to cool the target in"


def test_a_target_placed_before_its_transformation_is_taken_back(env, games_by_type):
    checked = 0
    for task in games_by_type["pick_heat_then_place"] + games_by_type["pick_clean_then_place"]:
        step, target = _taken(expert.demonstrate(env, task))
        goals = _targets(task).goal_receptacles
        chosen = []

        def to_goal(commands, goals=goals, chosen=chosen):
            chosen.append(next(c.removeprefix("go to ") for c in commands
                               if c.startswith("go to ") and c[6:] in goals))
            return f"go to {chosen[0]}"

        def place(commands, target=target, chosen=chosen):  # put in place untransformed
            move = f"move {target} to {chosen[0]}"
            return move if move in commands else commands[0]

        played = expert.noisy_demonstration(
            env, task, _Mistakes({step + 1: to_goal, step + 2: place}), 1.0)
        assert played is not None, f"{task.task_id}: the demonstrator stalls after an early put"
        actions, labels = played
        if actions[step + 2] != f"move {target} to {chosen[0]}":
            continue
        assert labels[step + 3] == f"take {target} from {chosen[0]}", task.task_id
        assert _replay(env, task, actions)[2]
        checked += 1
    assert checked, "no game let the target be put in place before its transformation"
