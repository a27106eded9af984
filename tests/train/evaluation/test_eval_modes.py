"""The prompting baselines of ``agentcredit eval --mode`` (train/evaluation/eval_modes.py): ReAct
reasons before each action; Reflexion retries failed tasks with its last 3 reflections in the
prompt, for at most its trials, and ends a trial when an action repeats. Driven by a scripted
policy on the fake corridor."""

from __future__ import annotations

import json
import re

import pytest
import torch

from agentcredit.cli import main
from agentcredit.rollout.collector import CollectorConfig, RolloutCollector
from agentcredit.rollout.policy import Generation
from agentcredit.rollout.prompts import PromptConfig
from agentcredit.train.evaluation.eval_modes import (
    EVAL_MODES,
    REACT_CUE,
    REFLECTION_ASK,
    ReflexionConfig,
    react,
    reflexion,
    stop_at_repeat,
)


class ScriptedAgent:
    """Answers in the tagged format from the prompt text. Acting: ``take apple`` when the apple
    is in sight, else ``go right`` once the prompt holds ``learns_after`` reflections, else
    ``go left``. Reflecting: ``reflection N`` (N counts the reflections written)."""

    def __init__(self, tokenizer, learns_after: int | None = 1):
        self.tokenizer = tokenizer
        self.learns_after = learns_after
        self.acting: list[str] = []
        self.reflections = 0

    def _reply(self, text: str) -> str:
        if REFLECTION_ASK in text:
            self.reflections += 1
            return f"I went the wrong way. reflection {self.reflections}"
        self.acting.append(text)
        if "You see an apple" in text.split("Current observation:")[-1]:
            move = "take apple"
        else:
            shown = len(re.findall(r"Attempt \d+:", text))
            learned = self.learns_after is not None and shown >= self.learns_after
            move = "go right" if learned else "go left"
        return f"<think>the apple is somewhere</think><action>{move}</action>"

    def generate(self, prompts, *, temperature, max_new_tokens, generator, tries=None,
                 prompt_cache=None):
        out = []
        for prompt in prompts:
            text = self._reply(self.tokenizer.decode(prompt))
            ids = self.tokenizer.encode(text, add_special_tokens=False) + \
                [self.tokenizer.eos_token_id]
            out.append(Generation(ids, [-0.5] * len(ids), text))
        return out


def _collector(fake_suite, agent) -> RolloutCollector:
    config = CollectorConfig(max_steps=6, prompt=PromptConfig(action_format="tagged",
                                                              max_prompt_tokens=1024))
    return RolloutCollector(agent, fake_suite(None).make_env, config)


def _tasks(make_fake_task):
    # a corridor of 3 rooms: start in room 1, the apple in room 2 (go right, take it); going
    # left twice repeats an action (the second time from room 0, where it is not admissible)
    return {"valid_seen": [make_fake_task("valid_seen", 1, size=3)]}


def test_react_asks_for_reasoning_before_each_action_and_scores_the_episode(
        fake_suite, fake_tokenizer, make_fake_task):
    agent = ScriptedAgent(fake_tokenizer, learns_after=0)
    metrics = react(_collector(fake_suite, agent), _tasks(make_fake_task), temperature=0.4,
                    generator=torch.Generator().manual_seed(0))
    assert metrics["eval/success"] == 1.0 and metrics["eval/valid_seen/won"] == "1"
    assert metrics["eval/valid_seen/invalid_rate"] == 0.0  # the tagged actions parsed
    assert all(" ".join(REACT_CUE.split()) in " ".join(p.split()) for p in agent.acting)


def test_reflexion_retries_a_failed_task_with_its_reflection_and_stops_when_solved(
        fake_suite, fake_tokenizer, make_fake_task):
    agent = ScriptedAgent(fake_tokenizer, learns_after=1)
    metrics = reflexion(_collector(fake_suite, agent), _tasks(make_fake_task), temperature=0.4,
                        generator=torch.Generator().manual_seed(0), config=ReflexionConfig(),
                        max_prompt_tokens=1024)
    assert metrics["eval/reflexion/success_after_trial_1"] == 0.0
    assert metrics["eval/reflexion/success_after_trial_2"] == 1.0
    assert metrics["eval/reflexion/success_after_trial_10"] == 1.0
    assert metrics["eval/success"] == 1.0 and metrics["eval/reflexion/trials_mean"] == 2.0
    assert agent.reflections == 1  # only the failed trial is reflected on
    # trial 1 went left from room 0 twice: stopped at the repeat, not played to the step limit
    assert metrics["eval/reflexion/repeat_stop_share"] == 0.5


def test_reflexion_keeps_the_last_three_reflections_for_at_most_its_trials(
        fake_suite, fake_tokenizer, make_fake_task):
    agent = ScriptedAgent(fake_tokenizer, learns_after=None)  # never learns
    metrics = reflexion(_collector(fake_suite, agent), _tasks(make_fake_task), temperature=0.4,
                        generator=torch.Generator().manual_seed(0), config=ReflexionConfig(),
                        max_prompt_tokens=1024)
    assert metrics["eval/success"] == 0.0 and metrics["eval/reflexion/trials_mean"] == 10.0
    assert agent.reflections == 10
    last_trial = agent.acting[-1]  # trial 10 sees reflections 7, 8, 9
    shown = [int(n) for n in re.findall(r"reflection (\d+)", last_trial)]
    assert shown == [7, 8, 9]
    assert metrics["eval/reflexion/repeat_stop_share"] == 1.0


def test_a_trial_ends_at_the_first_repeated_action_unless_that_action_ended_it(
        fake_suite, fake_tokenizer, make_fake_task):
    agent = ScriptedAgent(fake_tokenizer, learns_after=None)
    collector = _collector(fake_suite, agent)
    (played,) = collector.collect([make_fake_task("valid_seen", 0)], 1, temperature=0.4,
                                  generator=torch.Generator().manual_seed(0))
    assert len(played.steps) == 6  # "go left" from room 0, six times
    stopped = stop_at_repeat(played)
    assert len(stopped.steps) == 2 and not stopped.won
    last_step_repeat = type(played)(task=played.task, group_id=0, steps=played.steps[:2],
                                    won=True)
    assert stop_at_repeat(last_step_repeat) is last_step_repeat


def test_the_cli_offers_exactly_the_evaluation_modes(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "--mode {" + ",".join(EVAL_MODES) + "}" in capsys.readouterr().out
    with pytest.raises(Exception, match="trials"):
        ReflexionConfig(trials=0)


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory, tiny_fake_run):
    """A run directory holding only the SFT warm start of the tiny fake-corridor model."""
    root = tmp_path_factory.mktemp("prompting_runs")
    assert main(["train", *tiny_fake_run, f"run.output_dir={root}", "run.name=sft",
                 "run.updates=0", "run.eval_at_start=false", "sft.epochs=2"]) == 0
    return root / "sft"


@pytest.mark.parametrize("mode", ["react", "reflexion"])
def test_eval_mode_on_a_checkpoint_writes_beside_the_standard_result(sft_run, mode, capsys):
    assert main(["eval", "--checkpoint", str(sft_run), "--mode", mode, "--trials", "2"]) == 0
    out = capsys.readouterr().out
    assert f"in {mode} mode" in out
    written = json.loads((sft_run / f"eval_reference_{mode}.json").read_text())
    assert written["mode"] == mode and "eval/success" in written
    assert ("eval/reflexion/success_after_trial_2" in written) == (mode == "reflexion")
    assert not (sft_run / "eval_reference.json").exists()  # the standard result is untouched


def test_eval_refuses_zero_trials_in_one_line(sft_run, capsys):
    assert main(["eval", "--checkpoint", str(sft_run), "--mode", "reflexion",
                 "--trials", "0"]) == 2
    assert "--trials 0" in capsys.readouterr().err


def test_a_prompting_mode_refuses_several_episodes_per_game_in_one_line(sft_run, capsys):
    assert main(["eval", "--checkpoint", str(sft_run), "--mode", "react",
                 "eval.episodes_per_game=2"]) == 2
    assert "eval.episodes_per_game = 2" in capsys.readouterr().err
