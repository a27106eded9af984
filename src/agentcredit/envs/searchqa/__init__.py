"""Search-augmented QA: the Search-R1 protocol and exact-match reward, offline over a
generated world, or over FlashRAG data with local BM25 or a Search-R1 retrieval server
(docs/searchqa.md).

    from agentcredit.envs.searchqa import SearchQAConfig, SearchQAEnv, build_tasks

    tasks = build_tasks("train", SearchQAConfig(num_passages=10_000, seed=0))
    env = SearchQAEnv()
    obs = env.reset(tasks[0])
    obs, reward, done, info = env.step("I should look it up. <search> Velmor </search>")

Modules: ``answers`` (normalisation, EM, F1), ``protocol`` (tags, messages,
``<information>``), ``corpus`` (passages), ``world`` (the generated entities and
passages), ``questions`` (question types), ``flashrag`` (jsonl loaders),
``retrieval`` (BM25), ``server`` (the retrieval-server client), ``sources`` (specs to
cached corpora and retrievers), ``tasks`` (config, tasks by split), ``engine`` (the
environment), ``expert``, ``verifier`` (VICT atoms, ``F``, mutations).
"""

from agentcredit.envs.searchqa.engine import SearchQAEnv
from agentcredit.envs.searchqa.tasks import SPLITS, SearchQAConfig, build_tasks

__all__ = ["SPLITS", "SearchQAConfig", "SearchQAEnv", "build_tasks"]
