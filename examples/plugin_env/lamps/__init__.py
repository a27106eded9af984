"""A lamp panel for agentcredit: press buttons until the lamps show the goal pattern.

``plugin.py`` registers it (options, suite, solver, probe words, verl step limit);
``engine.py`` holds the tasks, the environment, its Level-0 verifier and its solver.
"""
