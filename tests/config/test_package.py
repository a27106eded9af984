"""The config package loads without torch or transformers, so ``agentcredit config`` and a
config check never pay for them."""

from __future__ import annotations

import os
import subprocess
import sys

CHECK = """
import importlib, pkgutil, sys
import agentcredit.config as config
for module in pkgutil.walk_packages(config.__path__, "agentcredit.config."):
    importlib.import_module(module.name)
for name in config.__all__:
    getattr(config, name)
loaded = [m for m in ("torch", "transformers") if m in sys.modules]
assert not loaded, loaded
"""


def test_the_config_package_and_every_name_it_exports_load_no_torch_or_transformers():
    subprocess.run([sys.executable, "-c", CHECK], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_an_environment_that_uses_the_schema_imports_before_the_sections_that_import_it():
    # the sections import the environments' options, which import config.schema: loading the
    # sections with the package would make importing an environment first a cycle
    code = ("import sys, agentcredit.envs.searchqa.tasks; "
            "assert 'agentcredit.config.sections' not in sys.modules; "
            "from agentcredit.config import TrainConfig; TrainConfig()")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
