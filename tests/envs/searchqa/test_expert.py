"""The expert solves every generated question within the turn limit, with suggested actions."""

from collections import Counter

from agentcredit.envs.searchqa.questions import QUESTION_TYPES


def test_the_expert_answers_every_generated_question_exactly(env, config, test_tasks):
    solved = Counter()
    for task in test_tasks:
        obs = env.reset(task)
        plan = env.expert(task)
        assert len(plan) <= config.max_turns
        for action in plan:
            assert action in obs.admissible_actions  # SFT with admissible decoding needs it
            obs, reward, done, info = env.step(action)
        assert done and reward == 1.0 and info.won, task.instruction
        solved[task.task_type] += 1
    assert set(solved) == set(QUESTION_TYPES) and sum(solved.values()) == len(test_tasks)
