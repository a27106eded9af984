"""Questions over the generated world, one family per dataset of the Search-R1 evaluation.

Question types (``Question.qtype``, the task type):

- ``single_hop`` (NQ, TriviaQA): one fact of the named entity (``Who directed X?``).
- ``bridge`` (HotpotQA): a fact of an entity the first passage names
  (``In what year was the director of X born?``).
- ``comparison`` (2WikiMultihopQA): two entities' years compared; the answer is one of
  their names (``Which film came out first, X or Y?``).
- ``composition`` (MuSiQue): three chained facts
  (``In which country was the director of X born?``).
- ``hard`` (Bamboogle): a small set of chains that start at a homonym, named only with
  its occupation (``What is the capital of the country where the painter X was born?``).

Each question lists its ``hops``: the passage holding the supporting fact of hop
``k`` (its title is the expert's query), the value that passage reveals (the bridge
entity hop ``k+1`` searches for, or the answer), and the hops it needs first. Golden
answers are the canonical answer followed by its aliases. Questions of a split only
name entities of that split (``world.py``), and no entity marked ``ambiguous``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentcredit.envs.searchqa.world import Entity, World

QUESTION_TYPES = ("single_hop", "bridge", "comparison", "composition", "hard")
#: how often each type is drawn (``hard`` is the small Bamboogle-like set).
TYPE_WEIGHTS = (0.3, 0.25, 0.15, 0.2, 0.1)


@dataclass(frozen=True)
class Hop:
    """One supporting fact of a question.

    Attributes:
        title: the title of the passage that states it (the expert searches it).
        doc_id: that passage's id.
        reveals: the value the passage gives: the next hop's entity or the answer.
        parents: indices of the hops whose revealed value this hop's query needs.
    """

    title: str
    doc_id: str
    reveals: str
    parents: tuple[int, ...] = ()


@dataclass(frozen=True)
class Question:
    """A generated question.

    Attributes:
        text: the question.
        answers: golden answers: the canonical one first, then aliases.
        qtype: one of ``QUESTION_TYPES``.
        hops: the supporting facts, in the expert's order.
        topics: titles of the passages about the entities the question names.
    """

    text: str
    answers: tuple[str, ...]
    qtype: str
    hops: tuple[Hop, ...]
    topics: tuple[str, ...]

    @property
    def answer_parents(self) -> tuple[int, ...]:
        """The hops the answer needs: every hop no other hop needs (the chain's end, or
        both sides of a comparison)."""
        needed = {p for hop in self.hops for p in hop.parents}
        return tuple(k for k in range(len(self.hops)) if k not in needed)

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "answers": list(self.answers), "qtype": self.qtype,
                "topics": list(self.topics),
                "hops": [{"title": h.title, "doc_id": h.doc_id, "reveals": h.reveals,
                          "parents": list(h.parents)} for h in self.hops]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Question:
        return cls(data["text"], tuple(data["answers"]), data["qtype"],
                   tuple(Hop(h["title"], h["doc_id"], h["reveals"], tuple(h["parents"]))
                         for h in data["hops"]), tuple(data["topics"]))


def _chain(world: World, path: Sequence[int], answer: str) -> tuple[Hop, ...]:
    """Hops along entities ``path``: hop ``k`` is ``path[k]``'s passage, revealing
    ``path[k+1]``'s name (the last one reveals ``answer``)."""
    hops = []
    for k, index in enumerate(path):
        reveals = world.entities[path[k + 1]].name if k + 1 < len(path) else answer
        entity = world.entities[index]
        hops.append(Hop(entity.title, str(index), reveals, (k - 1,) if k else ()))
    return tuple(hops)


def _ask(world: World, qtype: str, text: str, path: Sequence[int],
         answers: Sequence[str]) -> Question:
    return Question(text, tuple(answers), qtype, _chain(world, path, answers[0]),
                    (world.entities[path[0]].title,))


def _single_hop(world: World, rng: random.Random, pool: dict[str, list[Entity]]) -> Question:
    e = rng.choice(pool["person"] + pool["film"] + pool["company"])
    m, a, answers = world.mention(e.index), e.attrs, world.answers
    if e.kind == "person":
        options = [(f"In what year was {m} born?", [a["birth_year"]]),
                   (f"Where was {m} born?", answers(e.links["birthplace"]))]
    elif e.kind == "film":
        options = [(f"Who directed {m}?", answers(e.links["director"])),
                   (f"In which year was {m} released?", [a["release_year"]])]
    else:
        options = [(f"Who founded {m}?", answers(e.links["founder"])),
                   (f"In what year was {m} founded?", [a["founded_year"]]),
                   (f"In which city is {m} headquartered?", answers(e.links["headquarters"]))]
    text, golden = rng.choice(options)
    return _ask(world, "single_hop", text, [e.index], golden)


def _bridge(world: World, rng: random.Random, pool: dict[str, list[Entity]]) -> Question:
    kind = rng.choice(("film", "company", "person"))
    e = rng.choice(pool[kind])
    m = world.mention(e.index)
    if kind == "person":
        city = e.links["birthplace"]
        country = world.entities[city].links["country"]
        return _ask(world, "bridge", f"In which country was {m} born?", [e.index, city],
                    world.answers(country))
    if kind == "company" and rng.random() < 0.34:
        city = e.links["headquarters"]
        country = world.entities[city].links["country"]
        return _ask(world, "bridge", f"In which country is {m} headquartered?",
                    [e.index, city], world.answers(country))
    role = "director" if kind == "film" else "founder"
    person = world.entities[e.links[role]]
    if rng.random() < 0.5:
        return _ask(world, "bridge", f"In what year was the {role} of {m} born?",
                    [e.index, person.index], [person.attrs["birth_year"]])
    return _ask(world, "bridge", f"Where was the {role} of {m} born?", [e.index, person.index],
                world.answers(person.links["birthplace"]))


def _composition(world: World, rng: random.Random, pool: dict[str, list[Entity]]) -> Question:
    kind = rng.choice(("film", "company"))
    e = rng.choice(pool[kind])
    m, role = world.mention(e.index), ("director" if kind == "film" else "founder")
    person = world.entities[e.links[role]]
    city = world.entities[person.links["birthplace"]]
    path = [e.index, person.index, city.index]
    if rng.random() < 0.6:
        return _ask(world, "composition", f"In which country was the {role} of {m} born?", path,
                    world.answers(city.links["country"]))
    return _ask(world, "composition",
                f"In what year was the birthplace of the {role} of {m} founded?", path,
                [city.attrs["founded_year"]])


_COMPARED = {"film": ("release_year", "Which film came out first, {a} or {b}?"),
             "person": ("birth_year", "Who was born first, {a} or {b}?"),
             "company": ("founded_year", "Which company was founded first, {a} or {b}?")}


def _comparison(world: World, rng: random.Random, pool: dict[str, list[Entity]]) -> Question:
    kind = rng.choice(tuple(_COMPARED))
    attr, template = _COMPARED[kind]
    a, b = rng.sample(pool[kind], 2)
    if a.attrs[attr] == b.attrs[attr]:
        raise _Retry
    first = a if int(a.attrs[attr]) < int(b.attrs[attr]) else b
    answers = world.answers(first.index)
    hops = (Hop(a.title, str(a.index), a.attrs[attr]), Hop(b.title, str(b.index), b.attrs[attr]))
    text = template.format(a=world.mention(a.index), b=world.mention(b.index))
    return Question(text, tuple(answers), "comparison", hops, (a.title, b.title))


def _hard(world: World, rng: random.Random, pool: dict[str, list[Entity]]) -> Question:
    people = [e for e in pool["person"] if e.shared_name] or pool["person"]
    e = rng.choice(people)
    city = world.entities[e.links["birthplace"]]
    m = world.mention(e.index)
    if rng.random() < 0.5:
        country = world.entities[city.links["country"]]
        return _ask(world, "hard", f"What is the capital of the country where {m} was born?",
                    [e.index, city.index, country.index], world.answers(country.links["capital"]))
    return _ask(world, "hard", f"In what year was the city where {m} was born founded?",
                [e.index, city.index], [city.attrs["founded_year"]])


class _Retry(Exception):
    """The draw gave no well-posed question (two equal years); draw again."""


_MAKERS = {"single_hop": _single_hop, "bridge": _bridge, "comparison": _comparison,
           "composition": _composition, "hard": _hard}


def _usable(world: World, question: Question) -> bool:
    """Every hop's passage is about an entity its mention singles out."""
    return not any(world.entities[int(h.doc_id)].ambiguous for h in question.hops)


def generate_questions(world: World, split: str, count: int, seed: int = 0) -> list[Question]:
    """``count`` distinct questions about the entities of ``split`` (types drawn by
    ``TYPE_WEIGHTS``), in a fixed order for ``(world, split, count, seed)``."""
    pool = {kind: [e for e in world.entities if e.kind == kind and e.split == split
                   and not e.ambiguous] for kind in ("person", "film", "company")}
    if any(len(entities) < 2 for entities in pool.values()):
        raise ValueError(f"split {split!r} has too few entities for questions "
                         f"({ {k: len(v) for k, v in pool.items()} }); use a larger "
                         "num_passages or split share")
    rng = random.Random(f"searchqa-questions/{seed}/{split}")
    questions: dict[str, Question] = {}
    for _ in range(count * 50):
        if len(questions) == count:
            break
        qtype = rng.choices(QUESTION_TYPES, TYPE_WEIGHTS)[0]
        try:
            question = _MAKERS[qtype](world, rng, pool)
        except _Retry:
            continue
        if _usable(world, question):
            questions.setdefault(question.text, question)
    return list(questions.values())
