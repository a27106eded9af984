"""Level-0 atoms from a goal state, measured against tau's hand-written DB atoms.

For every tau2 task (retail and airline, split ``base``) whose reward basis has the database,
the goal is declared from the golden diff alone (``verifier/goal.py``): each golden record
must equal its golden value (``equal:db:<table>/<key>``) and nothing else under ``db:`` may
change (``unchanged:db:``). The hand-written verifier (``envs/tau/verifier.py``) has the
matching ``write:<table>/<key>`` atoms and ``no_extra_writes``. Both are evaluated on every
state of the golden replay and of wrong sequences made from it (its last write dropped, cut
short at a random step, a stray write first, and ``--fuzz`` random sequences of tool calls,
golden calls and messages); a hand-written atom counts as reproduced when the derived one has
the same status on every state of every sequence of its task.

    python benchmarks/level0_tau.py [--quick] [--fuzz N]
"""

from __future__ import annotations

import json
import random
import time

from agentcredit.envs.tau.domains import load_domain
from agentcredit.envs.tau.engine import TauEnv
from agentcredit.envs.tau.reward import DB, golden_actions, reward_basis
from agentcredit.envs.tau.snapshot import DB_PREFIX
from agentcredit.envs.tau.tasks import build_tasks
from agentcredit.envs.tau.verifier import golden_plan
from agentcredit.verifier.goal import Goal, goal_atoms
from bench_common import BenchmarkParser, at_least, run_script, write_result

SEED = 0
STRAY = {"retail": '{"name": "modify_user_address", "arguments": {"user_id": '
                   '"noah_brown_6181", "address1": "1 A St", "address2": "", "city": "X", '
                   '"state": "CA", "country": "USA", "zip": "90000"}}',
         "airline": '{"name": "send_certificate", "arguments": {"user_id": "mia_li_3668", '
                    '"amount": 50}}'}


def sequences(env: TauEnv, task, tau_task: dict, rng: random.Random, fuzz: int
              ) -> dict[str, list[str]]:
    """The golden replay and the wrong sequences made from it (module docstring)."""
    plan = env.expert(task)
    writes = [i for i, a in enumerate(plan) if '"order_id"' in a or '"reservation_id"' in a
              or '"user_id"' in a]
    out = {"golden": plan, "cut_short": plan[:rng.randrange(len(plan))] if plan else [],
           "stray_write": [STRAY[env.domain], *plan]}
    if writes:
        out["last_write_dropped"] = plan[:writes[-1]] + plan[writes[-1] + 1:]
    golden = golden_actions(tau_task)
    for k in range(fuzz):
        actions = []
        for _ in range(rng.randint(1, 2 * len(plan) + 1)):
            kind = rng.randrange(3)
            if kind == 0 and golden:
                call = rng.choice(golden)
                actions.append(json.dumps({"name": call["name"], "arguments": call["arguments"]}))
            elif kind == 1 and plan:
                actions.append(rng.choice(plan))
            else:
                actions.append(rng.choice(["Could you give me your email address?",
                                           "Shall I proceed?", STRAY[env.domain]]))
        out[f"fuzz{k}"] = actions
    return out


def play(env: TauEnv, task, actions: list[str]) -> list[dict]:
    env.reset(task)
    states = [env.snapshot()]
    for action in actions:
        _, _, done, _ = env.step(action)
        states.append(env.snapshot())
        if done:
            break
    return states


def measure(domain: str, limit: int | None, fuzz: int, rng: random.Random) -> dict:
    env = TauEnv(domain)
    tasks = build_tasks(domain, "base")[:limit]
    hand_atoms = reproduced = states_checked = disagreements = tasks_used = 0
    by_kind = {"write": [0, 0], "no_extra_writes": [0, 0]}
    statuses: dict[str, int] = {}  # the hand-written atoms' statuses seen, to show both occur
    for task in tasks:
        tau_task = load_domain(domain).tasks[task.payload["tau_id"]]
        if DB not in reward_basis(tau_task):
            continue
        tasks_used += 1
        hand = env.verifier(task)
        diff, _ = golden_plan(domain, tau_task)
        pairs = {f"write:{record}": f"equal:{DB_PREFIX}{record}" for record in diff}
        pairs["no_extra_writes"] = f"unchanged:{DB_PREFIX}"
        agree = dict.fromkeys(pairs, True)
        for actions in sequences(env, task, tau_task, rng, fuzz).values():
            states = play(env, task, actions)
            derived = {a.atom_id: a for a in goal_atoms(
                Goal(equal={DB_PREFIX + r: v for r, v in diff.items()},
                     unchanged=(DB_PREFIX,)), states[0])}
            for state in states:
                states_checked += 1
                for hand_id, derived_id in pairs.items():
                    status = hand.atom(hand_id).predicate(state, {})
                    same = status is derived[derived_id].predicate(state, {})
                    name = f"{hand_id.split(':')[0]}:{status.value}"
                    statuses[name] = statuses.get(name, 0) + 1
                    agree[hand_id] &= same
                    disagreements += not same
        for hand_id, ok in agree.items():
            kind = "no_extra_writes" if hand_id == "no_extra_writes" else "write"
            by_kind[kind][0] += 1
            by_kind[kind][1] += ok
        hand_atoms += len(agree)
        reproduced += sum(agree.values())
    return {"tasks": tasks_used, "hand_db_atoms": hand_atoms, "reproduced": reproduced,
            "share": reproduced / hand_atoms if hand_atoms else float("nan"),
            "write_atoms": by_kind["write"][0], "write_reproduced": by_kind["write"][1],
            "no_extra_writes_atoms": by_kind["no_extra_writes"][0],
            "no_extra_writes_reproduced": by_kind["no_extra_writes"][1],
            "states_checked": states_checked, "status_disagreements": disagreements,
            "hand_statuses_seen": dict(sorted(statuses.items()))}


def main() -> None:
    parser = BenchmarkParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 tasks per domain, 2 fuzzed")
    parser.add_argument("--fuzz", type=at_least(0), default=8, help="random sequences per task")
    args = parser.parse_args()
    rng = random.Random(SEED)
    limit, fuzz = (10, 2) if args.quick else (None, args.fuzz)
    start = time.perf_counter()
    metrics = {domain: measure(domain, limit, fuzz, rng) for domain in ("retail", "airline")}
    metrics["seconds"] = time.perf_counter() - start
    path = write_result(
        "level0_tau", {"split": "base", "fuzz": fuzz, "limit": limit, "seed": SEED}, metrics,
        {"share": "1.0 (every hand-written DB atom reproduced with the same statuses)"},
        "Level-0 atoms derived from the golden diff (verifier/goal.py) against tau's "
        "hand-written write:* and no_extra_writes atoms, on golden replays and wrong sequences.",
        args.quick)
    print(json.dumps(metrics, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    run_script(main)
