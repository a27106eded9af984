"""The search QA verifier: F ≡ V exactly, hop atoms and their dependencies, the mutations."""

import random

from agentcredit.envs.searchqa.engine import SearchQAEnv, task_question
from agentcredit.verifier.atoms import Status
from agentcredit.verifier.reconstruction import evidence_timeline, mutation_outcomes
from agentcredit.verifier.trace import trace_rollout


def _random_walk(env, task, seed):
    rng, obs, actions = random.Random(seed), env.reset(task), []
    for _ in range(4):
        action = rng.choice([*obs.admissible_actions, "no tags at all"])
        actions.append(action)
        obs, _, done, _ = env.step(action)
        if done:
            break
    return actions


def test_f_equals_v_on_expert_random_and_mutated_states(env, test_tasks, play):
    scores, mutants = set(), 0
    for task in test_tasks:
        verifier = env.verifier(task)
        for actions in [env.expert(task)] + [_random_walk(env, task, s) for s in range(4)]:
            texts, states, results = play(env, task, actions)
            timeline = evidence_timeline(verifier, texts, states)
            for state, evidence in zip(states, timeline, strict=True):
                assert verifier.score(state, evidence) == verifier.original(state)
                for outcome in mutation_outcomes(verifier, state, evidence):
                    assert outcome.agrees, (task.task_id, outcome)
                    mutants += 1
            assert verifier.original(states[-1]) == results[-1][0]  # V is the reward
            scores.add(verifier.original(states[-1]))
    assert scores == {0.0, 1.0} and mutants > 1000


def test_hop_atoms_depend_on_the_hop_whose_bridge_their_query_needs(env, test_tasks):
    by_type = {t.task_type: t for t in test_tasks}
    chain = env.verifier(by_type["composition"])
    assert [(a.atom_id, a.dependencies) for a in chain.atoms] == [
        ("hop:0", ()), ("hop:1", ("hop:0",)), ("hop:2", ("hop:1",)), ("answer", ("hop:2",))]
    comparison = env.verifier(by_type["comparison"])
    assert [(a.atom_id, a.dependencies) for a in comparison.atoms] == [
        ("hop:0", ()), ("hop:1", ()), ("answer", ("hop:0", "hop:1"))]


def test_expert_mutants_score_as_hand_worked(env, test_tasks, play):
    task = next(t for t in test_tasks if t.task_type == "bridge")
    question, verifier = task_question(task), env.verifier(task)
    texts, states, _ = play(env, task, env.expert(task))
    evidence = evidence_timeline(verifier, texts, states)[-1]
    outcomes = {o.name: (o.f_score, o.v_score) for o in
                mutation_outcomes(verifier, states[-1], evidence)}
    assert outcomes == {"wrong_answer": (0.0, 0.0), "alias_answer": (1.0, 1.0),
                        "decorated_answer": (1.0, 1.0), "withdraw_answer": (0.0, 0.0)}
    # the wrong answer is the bridge entity, a classic multi-hop mistake
    assert question.hops[0].reveals not in question.answers


def test_each_search_reveals_its_hop_and_the_answer_commits(env, test_tasks, play):
    task = next(t for t in test_tasks if t.task_type == "composition")
    verifier = env.verifier(task)
    texts, states, _ = play(env, task, env.expert(task))
    trace = trace_rollout(verifier, texts, states, env.expert(task))
    ids = [a.atom_id for a in trace.atoms]
    for t, hop in enumerate(("hop:0", "hop:1", "hop:2")):
        assert trace.statuses[t][ids.index(hop)] is Status.UNSAT
        assert trace.statuses[t + 1][ids.index(hop)] is Status.SAT
    edges = {(e.step, e.atom_id, e.relation) for e in trace.edges if e.valid}
    assert {(0, "hop:0", "reveal"), (1, "hop:1", "reveal"), (2, "hop:2", "reveal"),
            (3, "answer", "commit")} <= edges
    assert trace.f_score == trace.v_score == 1.0


def test_a_decided_answer_scope_commits_only_the_answer_not_the_hops(test_tasks, play):
    task = next(t for t in test_tasks if t.task_type == "composition")
    scoped = {}
    for scope in ("all", "decided"):
        env = SearchQAEnv(answer_scope=scope)
        texts, states, _ = play(env, task, env.expert(task))
        trace = trace_rollout(env.verifier(task), texts, states, env.expert(task))
        scoped[scope] = {(e.step, e.atom_id) for e in trace.edges
                         if e.valid and e.relation == "commit"}
    # the answer is step 3; "all" makes it a witness of the three hops too
    assert scoped["all"] == {(3, "answer"), (3, "hop:0"), (3, "hop:1"), (3, "hop:2")}
    assert scoped["decided"] == {(3, "answer")}


def _trace_with_menus(env, task, actions):
    obs = env.reset(task)
    texts, states, menus = [obs.text], [env.snapshot()], [obs.admissible_actions]
    for action in actions:
        obs, _, _, _ = env.step(action)
        texts.append(obs.text)
        states.append(env.snapshot())
        menus.append(obs.admissible_actions)
    return trace_rollout(env.verifier(task), texts, states, actions, admissible=menus)


def test_the_search_that_first_showed_the_answer_supports_the_answer_commit(env, test_tasks):
    # docs/searchqa.md (support rule): the menu holds the answers for the spans shown, so the
    # last search, which showed the answer span, made <answer> admissible; with the default
    # answer_scope=all it is already a witness (a reveal) of the hop it showed, but not of
    # the answer atom, whose evidence path it is
    task = next(t for t in test_tasks if t.task_type == "composition")
    actions = env.expert(task)
    trace = _trace_with_menus(env, task, actions)
    support = {(e.step, e.atom_id) for e in trace.edges if e.relation == "support" and e.valid}
    assert (2, "answer") in support
    answer = [e for e in trace.edges if e.atom_id == "answer" and e.valid]
    assert {(e.step, e.relation) for e in answer} == {(2, "support"), (3, "write"), (3, "commit")}
    assert [e.weight for e in answer if e.relation == "support"] == [1.0]
