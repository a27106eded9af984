"""The ``searchqa`` suite: ``env=searchqa`` in a run config, its splits and its settings."""

import re

import pytest

from agentcredit.config import ConfigError, load_config

SMALL = ["env=searchqa", "env.searchqa.num_passages=500", "env.searchqa.train_questions=10",
         "env.searchqa.valid_questions=5", "env.searchqa.test_questions=5"]


def test_env_searchqa_builds_its_suite_with_the_configured_environment():
    config = load_config(None, [*SMALL, "env.searchqa.max_turns=2", "env.searchqa.topk=1"])
    suite = config.env.build_suite()
    assert suite.splits == ("train", "valid", "test") and suite.validation_splits == ("valid",)
    tasks = suite.tasks("valid")
    assert len(tasks) == 5 and all(t.env == "searchqa" for t in tasks)
    env = suite.make_env()
    env.reset(tasks[0])
    obs, _, done, _ = env.step(env.expert(tasks[0])[0])
    assert obs.text.count("Doc ") == 1 and not done
    _, _, done, _ = env.step("no tags")
    assert done  # two turns


@pytest.mark.parametrize(("override", "says"), [
    ("env.searchqa.topk=0", "env.searchqa.topk = 0 is out of range"),
    ("env.searchqa.retriever_url=localhost:8000", "must be an http(s) URL"),
])
def test_bad_settings_name_the_key_and_the_fix(override, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        load_config(None, [*SMALL, override])
