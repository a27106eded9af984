import random

import pytest

from agentcredit.credit.vict.diagnostics import irreversibility_breaks
from agentcredit.envs.alfworld.game_file import read_game_file
from agentcredit.envs.alfworld.verifier import read_game_facts
from agentcredit.verifier.atoms import Status
from agentcredit.verifier.reconstruction import evidence_timeline, mutation_outcomes
from agentcredit.verifier.trace import trace_rollout


def _random_actions(env, task, seed, steps=40):
    rng, actions = random.Random(seed), []
    obs = env.reset(task)
    for _ in range(steps):
        actions.append(rng.choice(obs.admissible_actions))
        obs, _, done, _ = env.step(actions[-1])
        if done:
            break
    return actions


def test_f_equals_v_equals_won_on_expert_random_and_mutated_trajectories(env, train_games, play):
    checked = mutants = 0
    for task in train_games:
        verifier = env.verifier(task)
        for actions in (env.expert(task), _random_actions(env, task, seed=1),
                        _random_actions(env, task, seed=2)):
            texts, states, results = play(env, task, actions)
            timeline = evidence_timeline(verifier, texts, states)
            for state, evidence in zip(states, timeline, strict=True):
                assert verifier.score(state, evidence) == verifier.original(state), task.task_id
                checked += 1
            for state, (_, _, info) in zip(states[1:], results, strict=True):
                assert verifier.original(state) == float(info.won), task.task_id
            for outcome in mutation_outcomes(verifier, states[-1], timeline[-1]):
                assert outcome.agrees, (task.task_id, outcome)
                mutants += 1
            trace = trace_rollout(verifier, texts, states, actions)
            assert irreversibility_breaks(trace) == (), (task.task_id, actions)
    assert checked > 500 and mutants > 50


def test_mutations_of_a_won_state_make_the_task_fail(env, games_by_type, play):
    names = set()
    for games in games_by_type.values():
        task = games[0]
        verifier = env.verifier(task)
        texts, states, _ = play(env, task, env.expert(task))
        timeline = evidence_timeline(verifier, texts, states)
        for outcome in mutation_outcomes(verifier, states[-1], timeline[-1]):
            names.add(outcome.name)
            assert outcome.v_score == 0.0 and outcome.f_score == 0.0, (task.task_id, outcome)
    assert names == {"wrong_receptacle", "clear_transformation", "swap_target", "drop_second"}


def test_placing_before_heating_is_a_premature_placement_violation(env, games_by_type, play):
    task = games_by_type["pick_heat_then_place"][0]
    verifier = env.verifier(task)
    unheated = [a for a in env.expert(task) if not a.startswith("heat ")]
    texts, states, results = play(env, task, unheated)
    statuses = verifier.statuses(states[-1], evidence_timeline(verifier, texts, states)[-1])
    assert statuses["final_placement"] is Status.SAT
    assert statuses["transformation"] is Status.UNSAT
    assert statuses["premature_placement"] is Status.VIOL
    assert statuses["object_held"] is Status.SAT
    assert verifier.is_commit(unheated[-1]) and "premature_placement" in verifier.commit_scope(
        unheated[-1])
    assert not results[-1][2].won


def _fetch_and_place(env, task, obj, goal):
    env.reset(task)
    home = next(f.split(", ")[1][:-1] for f in env.snapshot()
                if f.startswith(f"inreceptacle({obj}, "))
    actions = [f"go to {home}", f"open {home}", f"take {obj} from {home}", f"go to {goal}",
               f"open {goal}", f"move {obj} to {goal}"]
    env.reset(task)
    taken = []
    for action in actions:
        if action in env.admissible_actions():
            env.step(action)
            taken.append(action)
    return taken


def test_putting_a_wrong_object_in_the_goal_receptacle_is_a_violation(env, games_by_type, play):
    task = games_by_type["pick_and_place"][0]
    verifier = env.verifier(task)
    facts = read_game_facts(task.task_type,
                            read_game_file(task.payload["game_file"])["pddl_problem"])
    env.reset(task)
    movable = [o for o in facts.other_objects
               if any(f.startswith(f"inreceptacle({o}, ") for f in env.snapshot())
               and not any(f"inreceptacle({o}, {g})" in env.snapshot()
                           for g in facts.goal_receptacles)]
    goal = facts.goal_receptacles[0]
    for obj in movable:
        actions = _fetch_and_place(env, task, obj, goal)
        if actions and actions[-1] == f"move {obj} to {goal}":
            break
    else:
        pytest.skip("no distractor of this game fits the goal receptacle")
    texts, states, _ = play(env, task, actions)
    statuses = verifier.statuses(states[-1], evidence_timeline(verifier, texts, states)[-1])
    assert statuses["wrong_object_placed"] is Status.VIOL
    assert verifier.score(states[-1], {}) == verifier.original(states[-1]) == 0.0


def test_atoms_name_the_facts_they_read_and_their_dependencies(env, games_by_type):
    task = games_by_type["pick_cool_then_place"][0]
    verifier = env.verifier(task)
    ids = [a.atom_id for a in verifier.atoms]
    # F.1: identity (held), transformation and placement; seeing is evidence, not an atom
    assert ids == ["object_held", "transformation", "premature_placement", "final_placement",
                   "wrong_object_placed", "target_misplaced", "wrong_object_held"]
    # lasting evidence cannot be undone; cooling is undone by heating (alfred.pddl), a
    # placement by taking the object back, each penalty by the move that clears it
    assert [j for j in ids if verifier.atom(j).irreversible] == ["object_held"]
    assert {j: verifier.atom(j).level for j in ids} == {
        "object_held": 2, "transformation": 0, "premature_placement": 2, "final_placement": 0,
        "wrong_object_placed": 2, "target_misplaced": 2, "wrong_object_held": 2}
    assert verifier.atom("final_placement").dependencies == ("object_held", "transformation")
    assert all(v.startswith("iscool(") for v in verifier.atom("transformation").state_vars)
    assert all(v.startswith("inreceptacle(") for v in verifier.atom("final_placement").state_vars)
    held = verifier.atom("object_held").state_vars
    assert {v.partition("(")[0].partition(":")[0] for v in held} == {"holds", "seen"}


def test_look_tasks_commit_on_the_lamp_and_need_the_object_in_hand(env, games_by_type, play):
    task = games_by_type["look_at_obj_in_light"][0]
    verifier = env.verifier(task)
    plan = env.expert(task)
    use = next(a for a in plan if a.startswith("use "))
    assert verifier.is_commit(use)
    assert verifier.commit_scope(use) == ("light_toggled", "object_held")
    assert not verifier.is_commit(plan[0])
    texts, states, results = play(env, task, plan)
    statuses = verifier.statuses(states[-1], evidence_timeline(verifier, texts, states)[-1])
    assert statuses["light_toggled"] is Status.SAT and statuses["object_held"] is Status.SAT
    assert results[-1][2].won


def test_evidence_is_what_observations_revealed(env, games_by_type):
    task = games_by_type["pick_and_place"][0]
    verifier = env.verifier(task)
    obs = env.reset(task)
    evidence = verifier.extract_evidence(obs.text, env.snapshot())
    assert any(k.startswith("seen:") for k in evidence)
    assert not any(k.startswith(("held:", "moved:")) for k in evidence)
    moved = verifier.extract_evidence("You move the pen 1 to the desk 2.", {})
    assert moved == {"moved:pen 1:desk 2": True} | {
        k: True for k in moved if k.startswith("seen:")}
