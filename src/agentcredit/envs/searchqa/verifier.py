"""The search QA verifier for VICT (docs/vict.md §4.1).

States are the engine's snapshots; evidence is what the observations showed:
``evidence:doc:<title>`` is set once a search's ``<information>`` lists that passage.

Atoms (a question with hops ``0..H-1``), ``atom`` (role, timing): status:

- ``hop:<k>`` (prerequisite, on_evidence): SAT once the passage holding hop ``k``'s
  supporting fact has been retrieved (``evidence:doc:<its title>``), else UNSAT. It
  depends on the hops whose revealed value its query needs (``Hop.parents``): hop
  ``k+1`` of a chain needs hop ``k``'s bridge entity; the two sides of a comparison
  need nothing. Once shown a passage stays shown, so the atom is irreversible;
  Level 2, an adapter over observations.
- ``answer`` (hard, on_commit): SAT iff an answer was given and it matches a golden
  answer exactly after normalisation (``answers.exact_match``), else UNSAT. It depends on
  the hops the answer needs (``Question.answer_parents``). Level 0: the final state.

``F`` (``ConjunctiveAggregator``): 1 iff ``answer`` is SAT. ``V`` is the environment's
reward, ``EM`` of the state's answer (0 unanswered), so ``F ≡ V`` on every state. The
commit is ``<answer>``; with ``answer_scope="all"`` (the default) it finalises every atom
(the episode ends), so the answer step is a witness of the hops too and a wrong answer
shares their credit; with ``answer_scope="decided"`` it commits only what it decides, the
``answer`` atom, and the hops keep the searches that showed them as their only witnesses.
FlashRAG questions have no hops: only the ``answer`` atom.

Mutations of a terminal state (docs/vict.md §4.2), each an edit of the answer given (a
state without one is left as it is, since adding an answer would add a commit):
``wrong_answer`` (the answer becomes the first hop's bridge value, or ``not <answer>``
when that is golden), ``alias_answer`` (the last golden alias), ``decorated_answer``
(the answer upper-cased, ``The`` before and ``!`` after: normalisation must forgive
it), ``withdraw_answer`` (the answer taken back).
"""

from __future__ import annotations

from typing import Any

from agentcredit.envs.base import Task
from agentcredit.envs.searchqa.answers import exact_match
from agentcredit.envs.searchqa.protocol import parse_response, shown_titles
from agentcredit.envs.searchqa.questions import Question
from agentcredit.verifier.aggregators import ConjunctiveAggregator
from agentcredit.verifier.atoms import Atom, State, Status, Verifier

DOC = "evidence:doc:"
ANSWERED, ANSWER = "answered", "answer"
#: what ``<answer>`` commits: every atom, or only the ``answer`` atom it decides
ANSWER_SCOPES = ("all", "decided")


def original_score(question: Question, state: State) -> float:
    """``V``: exact match of the state's answer (0 before an answer)."""
    if not state.get(ANSWERED):
        return 0.0
    return exact_match(state.get(ANSWER, ""), question.answers)


def extract_evidence(text: str, state: State) -> dict[str, Any]:
    """Every passage an ``<information>`` observation lists: ``evidence:doc:<title>``."""
    return {DOC + title: True for title in shown_titles(text)}


def build_atoms(question: Question) -> tuple[Atom, ...]:
    """The atoms of one question, hops first (see the module table)."""
    atoms = []
    for k, hop in enumerate(question.hops):
        key = DOC + hop.title

        def revealed(state: State, evidence: Any, key: str = key) -> Status:
            return Status.SAT if evidence.get(key) else Status.UNSAT

        atoms.append(Atom(f"hop:{k}", revealed, "on_evidence",
                          tuple(f"hop:{p}" for p in hop.parents), (key,), "prerequisite",
                          audit_source=f"a search showed {hop.title!r}, which gives "
                                       f"{hop.reveals!r}",
                          irreversible=True, level=2))

    def correct(state: State, evidence: Any) -> Status:
        return Status.SAT if original_score(question, state) == 1.0 else Status.UNSAT

    atoms.append(Atom("answer", correct, "on_commit",
                      tuple(f"hop:{k}" for k in question.answer_parents),
                      (ANSWERED, ANSWER), "hard",
                      audit_source="exact match after normalisation with a golden answer",
                      irreversible=True, level=0))
    return tuple(atoms)


def _mutations(question: Question) -> dict[str, Any]:
    golden = question.answers
    bridge = question.hops[0].reveals if question.hops else ""
    wrong = bridge if bridge and not exact_match(bridge, golden) else f"not {golden[0]}"

    def answer_with(make):
        def mutate(state: State, evidence: Any):
            if not state.get(ANSWERED):  # an edit of the answer given; there is none
                return state, evidence
            return {**state, ANSWER: make(state)}, evidence
        return mutate

    def withdraw(state: State, evidence: Any):
        return {**state, ANSWERED: False, ANSWER: ""}, evidence

    return {"wrong_answer": answer_with(lambda s: wrong),
            "alias_answer": answer_with(lambda s: golden[-1]),
            "decorated_answer": answer_with(lambda s: f"The {s.get(ANSWER, '').upper()}!"),
            "withdraw_answer": withdraw}


def is_commit(action: str) -> bool:
    """An ``<answer>`` response commits."""
    return parse_response(action).kind == "answer"


def build_verifier(task: Task, question: Question, answer_scope: str = "all") -> Verifier:
    """The VICT verifier of one search QA question; ``answer_scope`` is what ``<answer>``
    commits (module notes)."""
    if answer_scope not in ANSWER_SCOPES:
        raise ValueError(f"build_verifier: answer_scope {answer_scope!r}; use one of "
                         f"{ANSWER_SCOPES} (env.searchqa.answer_scope)")
    atoms = build_atoms(question)
    scope = tuple(a.atom_id for a in atoms) if answer_scope == "all" else ("answer",)
    return Verifier(
        task_id=task.task_id, atoms=atoms,
        aggregate=ConjunctiveAggregator.from_atoms(atoms),
        original=lambda state: original_score(question, state),
        is_commit=is_commit,
        commit_scope=lambda action: scope if is_commit(action) else (),
        extract_evidence=extract_evidence,
        mutations=_mutations(question),
        env="searchqa",
    )
