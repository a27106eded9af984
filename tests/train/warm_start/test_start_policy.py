"""The warm start's demonstration settings per environment (train/warm_start/start_policy.py)."""

from __future__ import annotations

from agentcredit.config import load_config
from agentcredit.train.warm_start.start_policy import demonstration_settings


class _Plain:
    """An environment whose expert cannot label noisy episodes."""


class _Labelling:
    def labelled_demonstration(self, task, rng, noise):
        raise AssertionError("not played here")


def test_noisy_repeated_demonstrations_apply_where_the_demonstrator_labels():
    config = load_config(None, ["sft.demonstration_noise=0.3", "sft.demonstrations_per_task=3"])
    assert demonstration_settings(config, _Labelling()) == (3, 0.3, None)


def test_other_environments_play_one_clean_demonstration_and_say_so():
    config = load_config(None, ["env=webshop", "sft.demonstration_noise=0.3",
                                "sft.demonstrations_per_task=3"])
    copies, noise, note = demonstration_settings(config, _Plain())
    assert (copies, noise) == (1, 0.0)
    assert "sft.demonstration_noise = 0.3" in note and "webshop" in note


def test_clean_single_demonstrations_need_no_note_anywhere():
    config = load_config(None, ["env=webshop", "sft.demonstration_noise=0",
                                "sft.demonstrations_per_task=1"])
    assert demonstration_settings(config, _Plain()) == (1, 0.0, None)
