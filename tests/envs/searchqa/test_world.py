"""The generated world and its questions: seeded, sized, split by entity, with aliases and
homonym distractors."""

from collections import Counter

from agentcredit.envs.searchqa.engine import task_question
from agentcredit.envs.searchqa.questions import QUESTION_TYPES, generate_questions
from agentcredit.envs.searchqa.tasks import build_tasks
from agentcredit.envs.searchqa.world import generate_world


def test_the_world_is_a_function_of_its_seed_with_exactly_the_passages_asked():
    a, b, c = generate_world(600, seed=1), generate_world(600, seed=1), generate_world(600, 2)
    assert a.passages == b.passages != c.passages
    assert len(a.passages) == 600
    assert len({p.title for p in a.passages}) == 600  # titles are unique


def test_homonyms_get_disambiguated_titles_and_kind_mentions():
    world = generate_world(3000, seed=0)
    shared = [e for e in world.entities if e.shared_name]
    assert len(shared) > 50
    kinds = Counter((e.kind, world.entities[i].kind) for e in shared for i in
                    [j for j in range(len(world.entities)) if world.entities[j].name == e.name
                     and j != e.index][:1])
    assert ("film", "city") in kinds and ("person", "person") in kinds
    for e in shared:
        assert e.title.startswith(f"{e.name} (") and e.title != e.name
        assert world.mention(e.index) == f"the {e.disambiguator} {e.name}"


def test_a_person_passage_names_the_birthplace_but_not_its_country():
    world = generate_world(1000, seed=0)
    person = next(e for e in world.entities if e.kind == "person")
    city = world.entities[person.links["birthplace"]]
    country = world.entities[city.links["country"]]
    text = world.passages[person.index].text
    assert city.name in text and country.name not in text
    assert country.name in world.passages[city.index].text


def test_test_questions_name_no_entity_a_train_question_names(config):
    def named(split):
        return {h.title for t in build_tasks(split, config)
                for h in task_question(t).hops[:2]}  # the topic and the person bridge

    world = generate_world(config.num_passages, config.seed)
    kinds = {e.title: e.kind for e in world.entities}
    overlap = named("train") & named("test")
    assert overlap and all(kinds[title] in ("city", "country") for title in overlap)


def test_every_question_type_occurs_and_golden_answers_carry_aliases(config):
    world = generate_world(config.num_passages, config.seed)
    questions = generate_questions(world, "train", 200, config.seed)
    assert {q.qtype for q in questions} == set(QUESTION_TYPES)
    with_alias = [q for q in questions if len(q.answers) > 1]
    assert len(with_alias) > 50
    country = next(q for q in with_alias if "country" in q.text)
    assert country.answers[1].endswith(f"of {country.answers[0]}")


def test_a_three_hop_question_chains_its_hops(config):
    world = generate_world(config.num_passages, config.seed)
    question = next(q for q in generate_questions(world, "train", 200, config.seed)
                    if q.qtype == "composition")
    assert [h.parents for h in question.hops] == [(), (0,), (1,)]
    assert question.answer_parents == (2,)
    assert question.hops[-1].reveals == question.answers[0]
    # hop k reveals the name of the entity hop k+1 is about
    for hop, after in zip(question.hops, question.hops[1:], strict=False):
        assert after.title.startswith(hop.reveals)
