"""The generated world: entities with attributes and relations, written as passages.

Five kinds of entity, each with one Wikipedia-style passage (title + text):

- country: continent, capital (a city), an official name (an alias);
- city: country, founding year;
- person: occupation, birth year, birthplace (a city), an initial-and-surname alias;
- film: release year, director (a person);
- company: founding year, founder (a person), headquarters (a city).

A person's passage names the birthplace but not its country, a film's the director but
not the director's birthplace, so multi-hop questions (``questions.py``) need one
search per hop. Distractors: a share of persons, films and companies reuse an earlier
entity's name (a person of another occupation, a film or company named like a city);
every holder of a shared name gets a disambiguated title (``Aldo Brenn (painter)``,
``Velmor (film)``) and is mentioned with its kind (``the painter Aldo Brenn``), and
common surnames make partial-name queries ambiguous.

Splits are by entity: persons, films and companies are dealt into ``train``,
``valid`` and ``test``; a film's director and a company's founder belong to its
split; cities and countries are ``shared`` (the world every split lives in). So a
question about a test entity names no entity a train question names.

Everything is a function of ``(num_passages, seed, ...)``: one passage per entity,
exactly ``num_passages`` of them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from agentcredit.envs.searchqa.corpus import Passage

KINDS = ("country", "city", "person", "film", "company")
#: share of passages per kind (countries, cities, persons, films, companies).
KIND_SHARES = (0.02, 0.08, 0.45, 0.25, 0.20)
SPLIT_KINDS = ("person", "film", "company")
CONTINENTS = ("Africa", "Asia", "Europe", "North America", "South America", "Oceania")
DIRECTOR_JOBS = ("film director", "screenwriter", "actor", "cinematographer")
FOUNDER_JOBS = ("entrepreneur", "engineer", "chemist", "banker")
OTHER_JOBS = ("painter", "novelist", "composer", "footballer", "physicist", "architect",
              "poet", "sculptor", "historian", "cyclist")
COMPANY_KINDS = ("Industries", "Holdings", "Motors", "Labs", "Foods", "Systems", "Textiles",
                 "Shipping", "Pharma", "Records")
_ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p",
           "r", "s", "st", "t", "tr", "v", "z", "th", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou")
_CODAS = ("", "", "n", "r", "l", "s", "m", "th", "nd", "rk")
_FILM_ADJECTIVES = ("Silent", "Broken", "Golden", "Last", "Hidden", "Crimson", "Distant",
                    "Frozen", "Wild", "Burning", "Quiet", "Endless", "Secret", "Hollow",
                    "Bright", "Lonely", "Iron", "Paper", "Velvet", "Savage")
_FILM_NOUNS = ("River", "Garden", "Harbour", "Winter", "Mirror", "Letter", "Station",
               "Horizon", "Orchard", "Lantern", "Voyage", "Empire", "Promise", "Shadow",
               "Summer", "Tide", "Crown", "Road", "Island", "Signal")
_FILLERS = ("{n} has been the subject of several books.",
            "Little else is recorded about {n} in the sources.",
            "{n} is discussed in many regional histories.",
            "Archives hold a number of documents about {n}.",
            "")


@dataclass
class Entity:
    """One entity of the world (and, at the same index, its passage).

    Attributes:
        index: position in ``World.entities`` and ``World.passages``.
        kind: one of ``KINDS``.
        name: what the world calls it (shared by homonyms).
        title: its passage's title, unique (``name`` or ``name (kind)``).
        split: ``train`` | ``valid`` | ``test`` for persons, films, companies; else ``shared``.
        attrs: attribute name -> value (``birth_year`` -> ``"1950"``, ``occupation`` -> ...).
        links: relation -> index of the linked entity (``director`` -> a person's index).
        aliases: other names an answer may use (``Republic of Arvenia``, ``A. Brenn``).
        shared_name: another entity has the same name.
        ambiguous: another entity has the same name and kind (or occupation), so no
            mention singles it out; questions never go through it.
    """

    index: int
    kind: str
    name: str
    title: str = ""
    split: str = "shared"
    attrs: dict[str, str] = field(default_factory=dict)
    links: dict[str, int] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    shared_name: bool = False
    ambiguous: bool = False

    @property
    def disambiguator(self) -> str:
        """The word that tells homonyms apart: a person's occupation, else the kind."""
        return self.attrs["occupation"] if self.kind == "person" else self.kind


@dataclass
class World:
    """The entities and their passages (``passages[i]`` is about ``entities[i]``)."""

    entities: list[Entity]
    passages: list[Passage]

    def mention(self, index: int) -> str:
        """How text names entity ``index``: its name, with its kind when the name is shared."""
        entity = self.entities[index]
        if not entity.shared_name:
            return entity.name
        return f"the {entity.disambiguator} {entity.name}"

    def answers(self, index: int) -> list[str]:
        """The golden answers naming entity ``index``: its name, then its aliases."""
        entity = self.entities[index]
        return [entity.name, *entity.aliases]


class _Names:
    """Unique invented names; a name is only ever reused on purpose (homonyms)."""

    def __init__(self, rng: random.Random):
        self.rng, self.used = rng, set()
        self.surnames = [self._word(2, 3) for _ in range(400)]

    def _word(self, low: int, high: int) -> str:
        syllables = [self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS)
                     for _ in range(self.rng.randint(low, high))]
        return ("".join(syllables) + self.rng.choice(_CODAS)).capitalize()

    def fresh(self, make) -> str:
        while True:
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name

    def place(self) -> str:
        return self.fresh(lambda: self._word(2, 3))

    def country(self) -> str:
        return self.fresh(lambda: self._word(2, 2) + self.rng.choice(("ia", "land", "stan",
                                                                      "ora")))

    def person(self) -> str:
        # a small surname pool: many people share a surname (partial-name distractors)
        return self.fresh(lambda: f"{self._word(1, 2)} {self.rng.choice(self.surnames)}")

    def film(self) -> str:
        rng = self.rng
        return self.fresh(lambda: rng.choice((
            lambda: f"The {rng.choice(_FILM_ADJECTIVES)} {rng.choice(_FILM_NOUNS)}",
            lambda: f"{rng.choice(_FILM_NOUNS)} of {self._word(2, 2)}",
            lambda: f"{rng.choice(_FILM_ADJECTIVES)} {self._word(2, 3)}"))())

    def company(self) -> str:
        return self.fresh(lambda: f"{self._word(2, 2)} {self.rng.choice(COMPANY_KINDS)}")


def _counts(num_passages: int) -> dict[str, int]:
    counts = {kind: max(4, int(num_passages * share))
              for kind, share in zip(KINDS, KIND_SHARES, strict=True)}
    counts["company"] += num_passages - sum(counts.values())
    if counts["company"] < 4:
        raise ValueError(f"num_passages={num_passages} is too small for a world; use >= 100")
    return counts


def _deal_splits(entities: list[Entity], rng: random.Random, valid_share: float,
                 test_share: float) -> None:
    people = [e for e in entities if e.kind == "person"]
    rng.shuffle(people)
    n_valid, n_test = round(len(people) * valid_share), round(len(people) * test_share)
    for k, person in enumerate(people):
        person.split = "valid" if k < n_valid else "test" if k < n_valid + n_test else "train"


def generate_world(num_passages: int = 10_000, seed: int = 0, homonym_share: float = 0.08,
                   valid_share: float = 0.1, test_share: float = 0.1) -> World:
    """The world of ``num_passages`` passages (see the module notes)."""
    rng = random.Random(f"searchqa-world/{seed}")
    names = _Names(rng)
    counts = _counts(num_passages)
    entities: list[Entity] = []

    def add(kind: str, name: str) -> Entity:
        entity = Entity(len(entities), kind, name)
        entities.append(entity)
        return entity

    countries = [add("country", names.country()) for _ in range(counts["country"])]
    cities = [add("city", names.place()) for _ in range(counts["city"])]
    for k, city in enumerate(cities):  # every country gets at least one city
        country = countries[k % len(countries)] if k < len(countries) else rng.choice(countries)
        city.links["country"] = country.index
        city.attrs["founded_year"] = str(rng.randint(1100, 1899))
        city.aliases = (f"{city.name} City",)
    for country in countries:
        own = [c for c in cities if c.links["country"] == country.index]
        country.links["capital"] = rng.choice(own).index
        country.attrs["continent"] = rng.choice(CONTINENTS)
        form = rng.choice(("Republic", "Kingdom", "Federation"))
        country.aliases = (f"{form} of {country.name}",)

    def person(job: str, name: str | None = None) -> Entity:
        entity = add("person", name or names.person())
        first, _, surname = entity.name.partition(" ")
        entity.attrs.update(occupation=job, birth_year=str(rng.randint(1900, 1985)))
        entity.links["birthplace"] = rng.choice(cities).index
        entity.aliases = (f"{first[0]}. {surname}",)
        return entity

    n_people, n_films, n_companies = counts["person"], counts["film"], counts["company"]
    people = [person(rng.choice(OTHER_JOBS)) for _ in range(n_people - n_films - n_companies)]
    while len(people) < n_people:  # directors and founders come with their films/companies
        job = DIRECTOR_JOBS if len(people) % 2 else FOUNDER_JOBS
        people.append(person(rng.choice(job)))
    for entity in people:  # homonyms: reuse an earlier person's name, another occupation
        if rng.random() < homonym_share and entity.index > people[0].index:
            other = entities[rng.randrange(people[0].index, entity.index)]
            if other.attrs["occupation"] != entity.attrs["occupation"]:
                entity.name = other.name
                entity.aliases = other.aliases
    _deal_splits(entities, rng, valid_share, test_share)
    by_role: dict[str, list[Entity]] = {"director": [], "founder": []}
    for entity in people:
        job = entity.attrs["occupation"]
        role = "director" if job in DIRECTOR_JOBS else "founder" if job in FOUNDER_JOBS else ""
        if role:
            by_role[role].append(entity)

    def staff(role: str) -> Entity:
        return rng.choice(by_role[role])

    for _ in range(n_films):
        name = rng.choice(cities).name if rng.random() < homonym_share else names.film()
        film = add("film", name)
        director = staff("director")
        film.split, film.links["director"] = director.split, director.index
        born = int(director.attrs["birth_year"])
        film.attrs["release_year"] = str(rng.randint(born + 20, born + 60))
    for _ in range(n_companies):
        name = rng.choice(cities).name if rng.random() < homonym_share else names.company()
        company = add("company", name)
        founder = staff("founder")
        company.split, company.links["founder"] = founder.split, founder.index
        company.links["headquarters"] = rng.choice(cities).index
        born = int(founder.attrs["birth_year"])
        company.attrs["founded_year"] = str(rng.randint(born + 20, born + 50))
    _title(entities)
    world = World(entities, [])
    world.passages = [_passage(world, e, rng) for e in entities]
    return world


def _title(entities: list[Entity]) -> None:
    """Give every entity a unique title; mark homonyms (``shared_name``) and those whose
    mention cannot single them out (``ambiguous``: same name and same kind or occupation)."""
    holders: dict[str, list[Entity]] = {}
    for entity in entities:
        holders.setdefault(entity.name, []).append(entity)
    for group in holders.values():
        for entity in group:
            entity.shared_name = len(group) > 1
            entity.title = (f"{entity.name} ({entity.disambiguator})" if entity.shared_name
                            else entity.name)
        twins: dict[str, list[Entity]] = {}
        for entity in group:
            twins.setdefault(entity.title, []).append(entity)
        for same in twins.values():
            for n, entity in enumerate(same, start=1):
                entity.ambiguous = len(same) > 1
                if n > 1:
                    entity.title = f"{entity.name} ({entity.disambiguator} {n})"


def _passage(world: World, e: Entity, rng: random.Random) -> Passage:
    m, a = world.mention, e.attrs
    link = e.links
    if e.kind == "country":
        text = (f"{e.name}, officially the {e.aliases[0]}, is a country in {a['continent']}. "
                f"Its capital is {m(link['capital'])}.")
        spans = [e.name, e.aliases[0], a["continent"], world.entities[link["capital"]].name]
    elif e.kind == "city":
        text = (f"{e.name} is a city in {m(link['country'])}. It was founded in "
                f"{a['founded_year']}.")
        spans = [e.name, world.entities[link["country"]].name, a["founded_year"]]
    elif e.kind == "person":
        job = a["occupation"]
        text = (f"{e.name} (born {a['birth_year']}) is {'an' if job[0] in 'aeiou' else 'a'} "
                f"{job}. {e.name} was born in {m(link['birthplace'])}.")
        spans = [e.name, a["birth_year"], world.entities[link["birthplace"]].name]
    elif e.kind == "film":
        text = f"{e.name} is a {a['release_year']} film directed by {m(link['director'])}."
        spans = [e.name, a["release_year"], world.entities[link["director"]].name]
    else:
        text = (f"{e.name} is a company founded in {a['founded_year']} by "
                f"{m(link['founder'])}. Its headquarters are in {m(link['headquarters'])}.")
        spans = [e.name, a["founded_year"], world.entities[link["founder"]].name,
                 world.entities[link["headquarters"]].name]
    filler = rng.choice(_FILLERS).format(n=e.name)
    return Passage(doc_id=str(e.index), title=e.title, text=f"{text} {filler}".strip(),
                   links=tuple(world.entities[i].title for i in link.values()),
                   spans=tuple(dict.fromkeys(spans)))
