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


def test_importing_the_package_loads_none_of_its_sections():
    code = ("import sys, agentcredit.config.schema; "
            "assert 'agentcredit.config.sections' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
