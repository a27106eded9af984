"""The skill provider (docs/adrs.md §5.1) and the prefix placement, text level and token level."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentcredit.envs.alfworld.tasks import TASK_TYPES
from agentcredit.envs.base import Task
from agentcredit.rollout.prompts import PromptConfig, build_messages, build_prompt_ids
from agentcredit.rollout.records import Step, Trajectory
from agentcredit.skills import (
    SKILL_HEADER,
    SkillNotFoundError,
    SkillProvider,
    SkillSplicer,
    insert_skill,
    skill_prefix,
    with_skill_prompts,
)
from agentcredit.train.warm_start.tokenizer_bootstrap import train_bpe_tokenizer

# Commands in the exact form the ALFWorld engine admits them.
ALFWORLD_COMMANDS = ("go to ", "take ", " from ", "move ", " to ", "open ", "use ", " with ")


def alfworld_task(task_type: str) -> Task:
    return Task(task_id=f"t-{task_type}", env="alfworld", split="train",
                instruction="put some egg in countertop", task_type=task_type)


@pytest.fixture(scope="module")
def provider() -> SkillProvider:
    return SkillProvider()


@pytest.fixture(scope="module")
def tokenizer(provider: SkillProvider):
    corpus = ["Your task is to: heat some egg", "go to countertop 1", "You arrive at cabinet 1."]
    return train_bpe_tokenizer(corpus * 3 + provider.corpus("alfworld"), vocab_size=1024)


# PROVIDER


def test_every_alfworld_task_type_has_a_skill_file_and_nothing_else_does(provider):
    assert provider.task_types("alfworld") == sorted(TASK_TYPES)


def test_skill_text_is_the_guide_then_the_task_file_separated_by_a_blank_line(provider):
    root = Path(str(provider.root)) / "alfworld"
    guide = (root / "guide.md").read_text().rstrip()
    heat = (root / "pick_heat_then_place.md").read_text().rstrip()
    assert provider.skill_text(alfworld_task("pick_heat_then_place")) == f"{guide}\n\n{heat}"


def test_provider_is_deterministic_across_calls_and_instances(provider):
    task = alfworld_task("pick_two_obj_and_place")
    assert provider.skill_text(task) == provider.skill_text(task) == \
        SkillProvider().skill_text(task)


def test_each_task_type_gets_a_different_skill(provider):
    texts = {provider.skill_text(alfworld_task(t)) for t in TASK_TYPES}
    assert len(texts) == len(TASK_TYPES)


@pytest.mark.parametrize("task_type", sorted(TASK_TYPES))
def test_alfworld_skills_are_short_and_use_the_engines_command_forms(provider, task_type):
    root = Path(str(provider.root)) / "alfworld"
    for name in ("guide.md", f"{task_type}.md"):
        assert len((root / name).read_text().split()) <= 160, name
    text = provider.text_for("alfworld", task_type)
    assert all(command in text for command in ("go to ", "take ", "move "))
    assert "put <object> in" not in text  # ALFWorld 0.4 says "move X to Y"


def test_guide_lists_every_command_form(provider):
    guide = (Path(str(provider.root)) / "alfworld" / "guide.md").read_text()
    assert all(command in guide for command in ALFWORLD_COMMANDS)


def test_a_missing_task_file_error_names_the_path_and_the_files_present(provider):
    with pytest.raises(SkillNotFoundError, match=r"pick_and_drop\.md does not exist.*guide\.md"):
        provider.skill_text(alfworld_task("pick_and_drop"))


def test_a_missing_environment_error_names_the_folder_and_known_environments(provider):
    with pytest.raises(SkillNotFoundError, match=r"environment 'nowhere'.*alfworld"):
        provider.text_for("nowhere", "anything")


def test_a_custom_root_without_a_guide_says_which_file_is_missing(tmp_path):
    (tmp_path / "webshop").mkdir()
    (tmp_path / "webshop" / "beauty.md").write_text("Compare prices.\n")
    with pytest.raises(SkillNotFoundError, match=r"environment guide.*guide\.md does not exist"):
        SkillProvider(tmp_path).text_for("webshop", "beauty")


def test_a_custom_root_serves_its_own_texts_without_trailing_whitespace(tmp_path):
    (tmp_path / "webshop").mkdir()
    (tmp_path / "webshop" / "guide.md").write_text("Search, then buy.\n\n")
    (tmp_path / "webshop" / "beauty.md").write_text("Check the size option.\n")
    assert SkillProvider(str(tmp_path)).text_for("webshop", "beauty") == \
        "Search, then buy.\n\nCheck the size option."


# PREFIX AND PLACEMENT


def test_skill_prefix_is_the_spec_format_verbatim():
    assert skill_prefix("Do X.") == "[Privileged Skill Information]\nDo X.\n\n"
    assert SKILL_HEADER == "[Privileged Skill Information]\n"


def test_insert_skill_prefixes_the_first_user_message_and_leaves_the_input_untouched():
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "Your task"},
                {"role": "user", "content": "later"}]
    out = insert_skill(messages, "Do X.")
    assert out[0] == messages[0] and out[2] == messages[2]
    assert out[1]["content"] == "[Privileged Skill Information]\nDo X.\n\nYour task"
    assert messages[1]["content"] == "Your task"


def test_insert_skill_puts_the_prefix_before_a_plain_prompt_string():
    assert insert_skill("Your task", "Do X.") == skill_prefix("Do X.") + "Your task"


def test_insert_skill_without_a_user_message_says_so():
    with pytest.raises(ValueError, match="no user message"):
        insert_skill([{"role": "system", "content": "sys"}], "Do X.")


def _prompt(tokenizer, history_len: int, observation: str) -> tuple[list[dict], list[int]]:
    args = ("put some egg in countertop",
            [("You see a cabinet 1.", "go to cabinet 1")] * history_len,
            observation, ["look", "go to countertop 1"])
    return (build_messages(*args, PromptConfig()),
            build_prompt_ids(tokenizer, *args, PromptConfig()))


def test_spliced_token_prompt_decodes_to_the_chat_template_of_the_text_level_insertion(
        tokenizer, provider):
    skill = provider.text_for("alfworld", "pick_heat_then_place")
    messages, ids = _prompt(tokenizer, 2, "You arrive at countertop 1.")
    spliced = SkillSplicer(tokenizer).privileged_prompt_ids(ids, skill)
    expected = tokenizer.apply_chat_template(insert_skill(messages, skill),
                                             add_generation_prompt=True, tokenize=False)
    assert tokenizer.decode(spliced) == expected


def test_every_step_of_a_task_shares_one_token_prefix_ending_in_the_skill(tokenizer, provider):
    splicer = SkillSplicer(tokenizer)
    skill = provider.text_for("alfworld", "pick_and_place")
    shared = {splicer.splice(_prompt(tokenizer, k, f"You arrive at cabinet {k}.")[1], skill)[0]
              for k in range(4)}
    assert len(shared) == 1
    (prefix,) = shared
    assert prefix[-len(splicer.prefix_ids(skill)):] == splicer.prefix_ids(skill)
    assert tokenizer.decode(list(prefix)).endswith(skill_prefix(skill))


def test_without_a_chat_template_the_skill_goes_before_the_whole_prompt(tokenizer, provider):
    plain = train_bpe_tokenizer(["go to countertop 1"] * 3, vocab_size=300)
    plain.chat_template = None
    ids = plain.encode("Your task is to: look", add_special_tokens=False)
    spliced = SkillSplicer(plain).privileged_prompt_ids(ids, "Do X.")
    assert plain.decode(spliced) == skill_prefix("Do X.") + "Your task is to: look"


def test_the_skill_shares_the_prompt_budget_and_the_prompt_is_left_truncated(
        tokenizer, provider):
    skill = provider.text_for("alfworld", "pick_and_place")
    _, ids = _prompt(tokenizer, 2, "You arrive at countertop 1.")
    full = SkillSplicer(tokenizer).privileged_prompt_ids(ids, skill)
    roomy = SkillSplicer(tokenizer, max_prompt_tokens=len(full))
    assert roomy.privileged_prompt_ids(ids, skill) == full  # fits: unchanged
    budget = len(full) - 7
    shared, rest = SkillSplicer(tokenizer, max_prompt_tokens=budget).splice(ids, skill)
    assert list(shared) + rest == full[7:]  # the first 7 tokens go, the ordinary text stays
    assert rest == ids[len(ids) - len(rest):]
    ordinary = ids[SkillSplicer(tokenizer).insertion_offset(ids):]
    tight = SkillSplicer(tokenizer, max_prompt_tokens=len(ordinary) - 3)  # the user text is over
    shared, rest = tight.splice(ids, skill)
    assert len(shared) == 1 and list(shared) + rest == ordinary[3:]


def test_splicing_a_prompt_without_the_user_header_fails_with_a_clear_error(tokenizer):
    ids = tokenizer.encode("go to countertop 1", add_special_tokens=False)
    with pytest.raises(ValueError, match="could not find the first user message"):
        SkillSplicer(tokenizer).splice(ids, "Do X.")


def test_with_skill_prompts_changes_only_the_prompts_of_copies(tokenizer, provider):
    _, ids = _prompt(tokenizer, 0, "You arrive at countertop 1.")
    step = Step(observation="o", response="look", action="look", valid=True, reward=0.0,
                anchor_key="o", snapshot={}, prompt_ids=ids, response_ids=[5, 6],
                sampling_logprobs=[-1.0, -2.0])
    trajectory = Trajectory(task=alfworld_task("pick_cool_then_place"), group_id=3, steps=[step])
    (copy,) = with_skill_prompts([trajectory], provider, SkillSplicer(tokenizer))
    assert trajectory.steps[0].prompt_ids == ids
    assert SKILL_HEADER in tokenizer.decode(copy.steps[0].prompt_ids)
    assert copy.steps[0].response_ids == [5, 6] and copy.group_id == 3


def test_ordinary_rollout_prompts_carry_no_skill_text(tokenizer, provider):
    skill = provider.text_for("alfworld", "pick_and_place")
    messages, ids = _prompt(tokenizer, 2, "You arrive at countertop 1.")
    text = tokenizer.decode(ids)
    assert SKILL_HEADER.strip() not in text and skill.splitlines()[0] not in text
    assert all(SKILL_HEADER.strip() not in m["content"] for m in messages)


def test_a_template_that_rejects_system_messages_still_gets_the_skill_in_the_user_turn():
    tok = train_bpe_tokenizer(["Your task is to: look"] * 3, vocab_size=300)
    tok.chat_template = (
        "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system') }}"
        "{% endif %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}"
        "{% endfor %}")
    messages = [{"role": "user", "content": "Your task is to: look"}]
    ids = tok.apply_chat_template(messages, tokenize=True, return_dict=False)
    spliced = SkillSplicer(tok).privileged_prompt_ids(ids, "Do X.")
    assert tok.decode(spliced) == tok.apply_chat_template(insert_skill(messages, "Do X."),
                                                          tokenize=False)
