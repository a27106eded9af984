"""The rollout viewer's data: saved updates chosen to fit a size budget, shaped for the page.

The viewer (``assets/report.js``) lets a reader pick a run, one of its saved
updates (``run.save_rollouts``, ``run/saved_rollouts.py``) and a task group
(labelled ``k/n won``), and shows each rollout as its steps coloured by final
advantage; it opens on the first group with signal (``opening``). Opening a step
shows the observation it acted on, its atoms, proof edges, witness (ledger) rows,
base advantage and correction, each value defined (``DEFINITIONS``), and with
teacher scores a per-token heat-map and the per-token advantages trained on. An update
saved with its solver truth (credit-checked as well as saved) also shows, for the chosen
group, each step's credit against its truth ``g_t`` (a scatter, one colour per rollout);
one saved without it says how to get it (``NO_TRUTH``).

This module only selects and arranges what the runs saved:

- **Budget.** The page must stay small however many runs it holds, so each run
  with saved updates gets an equal share of ``budget_bytes`` of viewer JSON. Its
  newest saved update comes first, then its first, then the others newest first,
  while they fit; an update too large on its own keeps the groups that fit.
  What was left out is said in ``notes`` (shown on the page).
- **Colours.** Steps are coloured by advantage on Plotly's ``RdBu`` scale
  (``plotly.colors.sample_colorscale``): red negative, blue positive, each update
  scaled by its largest |advantage|. Tokens are coloured by the teacher signal
  ``ℓ^T − ℓ^b`` (docs/adrs.md §5.5), or ``ℓ^T`` when the behaviour log-prob was not
  saved, each step scaled by its own largest |value|.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from plotly.colors import get_colorscale, sample_colorscale

from agentcredit.report.run_files import RunData, clean_json, has_escaped_surrogate
from agentcredit.run.saved_rollouts import read_saved_rollouts

SCALE = "RdBu"
_STOPS = get_colorscale(SCALE)
#: opacity of the colours over the white page
ALPHA = 0.6
HEAT_GAP = "ℓ^T − ℓ^b (teacher minus behaviour log-prob)"
HEAT_TEACHER = "ℓ^T (teacher log-prob)"
#: what each value of an opened step means (the viewer's legend and tooltips); names the
#: estimators save (``CreditResult.extras``, docs/vict.md §4.6, docs/adrs.md §5.4)
DEFINITIONS = {
    "advantage": "the step's final advantage, A^final: what PPO trained every token of this "
                 "action on (for token-level credit such as ADRS, see token advantage)",
    "step_advantage": "the step's advantage before the token path, A^traj (ADRS: the "
                      "backbone's advantage on the shaped reward); PPO trains on the per-token "
                      "values instead",
    "token_advantage": "the per-token advantage PPO trained on: A^traj plus the token path "
                       "η·Z^T (docs/adrs.md §5.4)",
    "base_advantage": "A^base: the backbone's advantage (GRPO, RLOO or GiGPO) before VICT",
    "vict_advantage": "A^VICT: the credit VICT routed to this step along its proof edges, "
                      "before the scale λ and the clip c",
    "correction": "λ · clip(A^VICT, −c, c): what VICT added; final = base + correction "
                  "(docs/vict.md §4.6)",
    "episode_advantage": "the backbone's episode-level advantage of this rollout",
    "anchor_group_ids": "GiGPO's step group: the steps of the group that share this anchor "
                        "state",
    "return_to_go": "the discounted reward from this step to the end",
    "hindsight_ratio": "HCAPO's hindsight ratio of this step",
    "reward": "the environment's reward for this step",
    "truth": "the solver regret g_t = d(s_t) − d(s_{t+1}) − 1 the credit check measured this "
             "step's credit against: 0 for an optimal step, −1 for a wasted one, lower for a "
             "setback (docs/credit_check.md §2.1)",
}
#: what the viewer says of an update saved without the solver truth
NO_TRUTH = ("No solver truth was saved with this update: train with run.credit_check_every=K "
            "together with run.save_rollouts, and every update that is both checked and saved "
            "shows its credit against the truth here.")


def viewer_data(runs: Sequence[RunData], budget_bytes: int
                ) -> tuple[dict[str, Any], list[str], list[str]]:
    """``({"runs": [...]}, notes, problems)``: the saved updates the page embeds, what the
    budget left out, and the saved files that could not be read."""
    saving = [run for run in runs if run.saved]
    share = budget_bytes // max(1, len(saving))
    shown, notes, problems = [], [], []
    for run in saving:
        left = share
        views = []
        for update, path in _priority(run.saved):
            try:
                view = shape_update(read_saved_rollouts(path))
            except ValueError as err:
                problems.append(f"{run.name}: {err}")
                continue
            except (KeyError, TypeError, IndexError, AttributeError) as err:
                problems.append(f"{run.name}: {path.name} has an unexpected layout "
                                f"({type(err).__name__}: {err}); it is left out of the viewer")
                continue
            text = json.dumps(view)
            if has_escaped_surrogate(text):  # rare: clean only then
                view = clean_json(view)
                text = json.dumps(view)
            size = len(text)
            if size > left:
                if views:
                    break
                view, size = _fit(view, left)
                notes.append(f"{run.name}: update {update} shows {len(view['groups'])} of "
                             f"{view['groups_total']} groups (raise --viewer-mb to see all)")
            views.append(view)
            left -= size
        if len(views) < len(run.saved):
            notes.append(f"{run.name}: the viewer holds {len(views)} of {len(run.saved)} saved "
                         f"updates ({', '.join(str(v['update']) for v in sorted(views, key=_u))}"
                         "); raise --viewer-mb to include more")
        if views:
            views.sort(key=_u)
            shown.append({"name": run.name, "method": run.method, "updates": views,
                          "open": opening(views)})
    return ({"runs": shown, "scale": SCALE, "definitions": DEFINITIONS, "no_truth": NO_TRUTH},
            notes, problems)


def shape_update(saved: dict[str, Any]) -> dict[str, Any]:
    """One saved update as the viewer reads it: rollouts grouped by task group, steps and
    tokens coloured."""
    steps = [step for rollout in saved["rollouts"] for step in rollout["steps"]]
    scale = max((abs(s["advantage"]) for s in steps if s["advantage"] is not None), default=0.0)
    positions = _positions([s["advantage"] for s in steps], scale)
    heated = [step["tokens"] for step in steps if "tokens" in step]
    for tokens in heated:
        tokens["heat"] = _heat(tokens)
        positions += _positions(tokens["heat"], max(
            (abs(v) for v in tokens["heat"] if v is not None), default=0.0))
    colours = _colours(positions)  # one call: Plotly's sampling has a cost per call
    for step, colour in zip(steps, colours[:len(steps)], strict=True):
        step["colour"] = colour
    used = len(steps)
    for tokens in heated:
        tokens["colours"] = colours[used:used + len(tokens["heat"])]
        used += len(tokens["heat"])
    groups: dict[Any, dict[str, Any]] = {}
    for rollout in saved["rollouts"]:
        group = groups.setdefault(rollout["group_id"], {
            "group_id": rollout["group_id"], "task_id": rollout["task_id"],
            "task_type": rollout["task_type"], "rollouts": [], "won": 0, "signal": False})
        rollout["return"] = sum(s["reward"] or 0.0 for s in rollout["steps"])
        group["rollouts"].append(rollout)
        group["won"] += bool(rollout["won"])
        group["signal"] = group["signal"] or any(s["advantage"] for s in rollout["steps"])
    token_fields = saved["token_fields"]
    heat = (HEAT_GAP if {"teacher_logprob", "behaviour_logprob"} <= set(token_fields)
            else HEAT_TEACHER if "teacher_logprob" in token_fields else "")
    return {"update": saved["update"], "estimator": saved["estimator"],
            "truth": saved.get("truth"),
            "step_fields": saved["step_fields"], "token_fields": token_fields, "heat": heat,
            "token_level": "token_advantage" in token_fields,
            "scale": scale, "groups": list(groups.values()), "groups_total": len(groups)}


def opening(updates: Sequence[dict[str, Any]]) -> list[int]:
    """``[update index, group index]`` the viewer opens a run on: the first group with signal
    (some step's advantage is not 0) of the newest update that has one, else the newest
    update's first group."""
    for u in range(len(updates) - 1, -1, -1):
        for g, group in enumerate(updates[u]["groups"]):
            if group["signal"]:
                return [u, g]
    return [len(updates) - 1, 0]


def _heat(tokens: dict[str, list]) -> list[float | None]:
    """Each token's heat value (see the module docstring)."""
    teacher = tokens.get("teacher_logprob", [])
    behaviour = tokens.get("behaviour_logprob")
    if behaviour is None:
        return list(teacher)
    return [None if t is None or b is None else t - b
            for t, b in zip(teacher, behaviour, strict=True)]


def _positions(values: Sequence[float | None], scale: float) -> list[float]:
    """``values`` in ``[−scale, scale]`` as positions on the colour scale (0.5 for 0 or a
    missing value)."""
    return [0.5 if v is None or scale <= 0 else min(1.0, max(0.0, 0.5 + v / (2 * scale)))
            for v in values]


def _colours(positions: list[float]) -> list[str]:
    """``RdBu`` colours at ``positions``, see-through (``ALPHA``) so text on them stays
    readable."""
    if not positions:
        return []
    return [colour.replace("rgb(", "rgba(").replace(")", f", {ALPHA})")
            for colour in sample_colorscale(_STOPS, positions)]


def _fit(view: dict[str, Any], budget: int) -> tuple[dict[str, Any], int]:
    """``view`` with only its leading groups that fit ``budget`` bytes (at least one)."""
    kept, used = [], 0
    for group in view["groups"]:
        size = len(json.dumps(group))
        if kept and used + size > budget:
            break
        kept.append(group)
        used += size
    view = {**view, "groups": kept}
    return view, len(json.dumps(view))


def _priority(saved: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """The newest saved update, the first, then the others newest first."""
    if len(saved) <= 2:
        return saved[::-1]
    return [saved[-1], saved[0], *saved[-2:0:-1]]


def _u(view: dict[str, Any]) -> int:
    return view["update"]
