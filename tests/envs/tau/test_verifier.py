"""The tau verifier: F equals V on expert, partial and wrong conversations and on every
mutant; atoms come from the golden diff, with reveal dependencies."""

from __future__ import annotations

import random

from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.tasks import build_tasks
from agentcredit.verifier.atoms import Status
from agentcredit.verifier.reconstruction import evidence_timeline, mutation_outcomes


def _play(env, task, actions):
    obs = env.reset(task)
    texts, states = [obs.text], [env.snapshot()]
    for action in actions:
        obs, _, done, _ = env.step(action)
        texts.append(obs.text)
        states.append(env.snapshot())
        if done:
            break
    return texts, states


def _variants(env, task, rng):
    """The expert's plan, with its last write dropped, cut short, and with a stray write."""
    plan = env.expert(task)
    writes = [i for i, a in enumerate(plan) if "order_id" in a or "reservation_id" in a]
    yield plan
    if writes:
        yield plan[:writes[-1]] + plan[writes[-1] + 1:]
    yield plan[:rng.randrange(len(plan))]
    stray = ('{"name": "modify_user_address", "arguments": {"user_id": "noah_brown_6181", '
             '"address1": "1 A St", "address2": "", "city": "X", "state": "CA", '
             '"country": "USA", "zip": "90000"}}' if env.domain == "retail" else
             '{"name": "send_certificate", "arguments": {"user_id": "mia_li_3668", '
             '"amount": 50}}')
    yield [stray, *plan]


def test_f_equals_v_on_every_state_and_every_mutant(domain):
    env, rng = TauEnv(domain.name), random.Random(0)
    tasks = build_tasks(domain.name, "base")[::4]
    scores, mutants = set(), 0
    for task in tasks:
        verifier = env.verifier(task)
        for actions in _variants(env, task, rng):
            texts, states = _play(env, task, actions)
            for state, evidence in zip(states, evidence_timeline(verifier, texts, states),
                                       strict=True):
                assert verifier.score(state, evidence) == verifier.original(state), task.task_id
                for outcome in mutation_outcomes(verifier, state, evidence):
                    assert outcome.agrees, (task.task_id, outcome)
                    mutants += 1
            assert verifier.original(states[-1]) == env.reward
            scores.add(env.reward)
    assert scores == {0.0, 1.0} and mutants > 100


def test_atoms_follow_the_golden_diff_and_writes_depend_on_their_reveals():
    task = build_tasks("retail", "base")[0]  # exchange on order #W2378156
    env = TauEnv("retail")
    verifier = env.verifier(task)
    ids = {a.atom_id: a for a in verifier.atoms}
    assert "write:orders/#W2378156" in ids
    write = ids["write:orders/#W2378156"]
    assert write.score_role == "hard"
    # the order id comes from the user, the new item ids and the card from lookups, the
    # owner's id from the user lookup (tau2's policy: authenticate before a write)
    assert {"reveal:#W2378156", "reveal:7706410293", "reveal:credit_card_9513926",
            "reveal:yusuf_rossi_9620"} <= set(write.dependencies)
    assert ids["no_extra_writes"].score_role == "penalty"
    texts, states = _play(env, task, env.expert(task))
    timeline = evidence_timeline(verifier, texts, states)
    statuses = verifier.statuses(states[-1], timeline[-1])
    assert all(s is Status.SAT for s in statuses.values())
    assert verifier.statuses(states[0], timeline[0])["write:orders/#W2378156"] is Status.UNSAT
    commit = env.expert(task)[4]
    assert verifier.is_commit(commit) and not verifier.is_commit(env.expert(task)[1])
    assert verifier.commit_scope(commit) == ("write:orders/#W2378156",)
