"""Random WebShop walks: rollouts of every kind for the WebShop and credit-batch tests."""

from __future__ import annotations

import random


def random_actions(env, task, seed: int, buy_bias: float = 0.3) -> list[str]:
    """A random walk over the admissible actions; searches use words of the instruction.

    With probability ``buy_bias`` an item page is answered with ``buy now`` so
    that random walks end in purchases of all kinds.
    """
    rng, actions = random.Random(seed), []
    words = task.instruction.replace(",", " ").split()
    obs, done = env.reset(task), False
    while not done:
        options = list(obs.admissible_actions)
        if options == ["search[<your query>]"]:
            query = rng.sample(words, min(len(words), rng.randint(1, 5)))
            action = "search[" + " ".join(query) + "]"
        elif "click[buy now]" in options and rng.random() < buy_bias:
            action = "click[buy now]"
        else:
            action = rng.choice(options)
        actions.append(action)
        obs, _, done, _ = env.step(action)
    return actions
