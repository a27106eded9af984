"""Level-0 atoms derived from the golden diff (``verifier/goal.py``) have the statuses of the
hand-written ``write:*`` and ``no_extra_writes`` atoms on the golden replay and on wrong
sequences (``benchmarks/level0_tau.py`` measures every task)."""

from __future__ import annotations

import random

from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.snapshot import DB_PREFIX
from agentcredit.envs.tau.tasks import build_tasks
from agentcredit.envs.tau.verifier import golden_plan
from agentcredit.verifier.atoms import Status
from agentcredit.verifier.goal import Goal, goal_atoms

from .test_verifier import _play, _variants


def test_goal_atoms_reproduce_the_hand_written_db_atoms_on_every_state(domain):
    env, rng = TauEnv(domain.name), random.Random(0)
    seen = set()
    for task in build_tasks(domain.name, "base")[::10]:
        hand = env.verifier(task)
        diff, _ = golden_plan(domain.name, load_domain(domain.name).tasks[task.payload["tau_id"]])
        pairs = {f"write:{r}": f"equal:{DB_PREFIX}{r}" for r in diff}
        pairs["no_extra_writes"] = f"unchanged:{DB_PREFIX}"
        for actions in _variants(env, task, rng):
            _, states = _play(env, task, actions)
            derived = {a.atom_id: a for a in goal_atoms(
                Goal(equal={DB_PREFIX + r: v for r, v in diff.items()},
                     unchanged=(DB_PREFIX,)), states[0])}
            for state in states:
                for hand_id, derived_id in pairs.items():
                    status = hand.atom(hand_id).predicate(state, {})
                    assert derived[derived_id].predicate(state, {}) is status, \
                        (task.task_id, hand_id, state)
                    seen.add(status)
    assert seen == {Status.SAT, Status.UNSAT, Status.VIOL}  # every status occurred
