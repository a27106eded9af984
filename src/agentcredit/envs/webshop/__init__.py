"""WebShop: its page flow, action space and reward over a generated catalog in its product
schema; official product and goal files load through ``official_catalog`` and
``official``.

    from agentcredit.envs.webshop.engine import WebShopEnv
    from agentcredit.envs.webshop.options import WebShopConfig
    from agentcredit.envs.webshop.tasks import build_tasks

    tasks = build_tasks("train", WebShopConfig(num_products=1000, seed=0))
    env = WebShopEnv()
    obs = env.reset(tasks[0])
    obs, reward, done, info = env.step("search[green tea bags]")

Modules: ``taxonomy`` (what is sold), ``catalog`` (products, generator), ``goals`` (goals,
phrasing, splits), ``options`` (the ``env.webshop`` settings), ``tasks`` (tasks by split),
``search`` (BM25), ``shop`` (catalog + index per spec), ``pages`` (page text), ``actions``
(the action grammar), ``engine`` (the environment), ``reward`` (the formula), ``snapshot``
(state and ``V``), ``expert``, ``verifier`` (VICT atoms and ``F``), ``official_catalog``
(WebShop's product and attribute files), ``official`` (its goal file and the tasks on
them).
"""
