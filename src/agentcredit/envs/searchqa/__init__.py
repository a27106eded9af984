"""Search-augmented QA: the Search-R1 protocol and exact-match reward, offline over a
generated world, or over FlashRAG data with local BM25 or a Search-R1 retrieval server
(docs/searchqa.md).

    from agentcredit.envs.searchqa.engine import SearchQAEnv
    from agentcredit.envs.searchqa.options import SearchQAConfig
    from agentcredit.envs.searchqa.tasks import build_tasks

    tasks = build_tasks("train", SearchQAConfig(num_passages=10_000, seed=0))
    env = SearchQAEnv()
    obs = env.reset(tasks[0])
    obs, reward, done, info = env.step("I should look it up. <search> Velmor </search>")

Modules: ``answers`` (normalisation, EM, F1), ``protocol`` (tags, messages,
``<information>``), ``corpus`` (passages), ``world`` (the generated entities and
passages), ``questions`` (question types), ``flashrag`` (jsonl loaders), ``retrieval``
(BM25), ``server`` (the retrieval-server client), ``sources`` (specs to cached corpora and
retrievers), ``options`` (the ``env.searchqa`` settings), ``tasks`` (tasks by split),
``engine`` (the environment), ``expert``, ``verifier`` (VICT atoms, ``F``, mutations).
"""
