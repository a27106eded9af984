"""The package's import graph: no cycles (function-level imports included), no private names
imported across modules, torch kept out of the environments and the run package, and the layer
rules of docs/design.md: what the environments, the rollout layer, the report and the
integrations may import."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import agentcredit

ROOT = Path(agentcredit.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path, name: str, modules: dict[str, Path]) -> list[tuple[str, list[str]]]:
    """``(imported module, names taken from it)`` for every import anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{base}.{alias.name}"
                found.append((sub, []) if sub in modules else (base, [alias.name]))
    return [(module, names) for module, names in found if module in modules]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {m for m, _ in _imports(path, name, modules) if m != name}
            for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_import_cycles():
    # a package __init__ that re-exports its submodules is not a cycle: drop parent edges
    graph = {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in _graph().items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_private_name_is_imported_from_another_module():
    modules = _modules()
    private = [(name, module, n) for name, path in modules.items()
               for module, names in _imports(path, name, modules) for n in names
               if n.startswith("_") and not n.startswith("__")]
    assert private == []


def test_environments_do_not_import_torch():
    offenders = [name for name, path in _modules().items() if name.startswith("agentcredit.envs")
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Import | ast.ImportFrom)
                 and any((getattr(node, "module", None) or a.name).split(".")[0] == "torch"
                         for a in node.names)]
    assert offenders == []


#: what the environments may import from outside envs/: the verifier interface and the
#: dependency-free leaf modules (the config schema, progress bars, disk-full errors, the
#: plug-in loader)
BELOW_ENVS = ("agentcredit.verifier", "agentcredit.config.schema", "agentcredit.progress",
              "agentcredit.disk_full", "agentcredit.plugins")


def test_the_plugin_loader_is_a_leaf_beside_the_config_schema():
    assert _layer_violations(_graph(), "agentcredit.plugins", ("agentcredit.config.schema",)) \
        == []


def _layer_violations(graph: dict[str, set[str]], layer: str, allowed: tuple[str, ...]
                      ) -> list[tuple[str, str]]:
    """``(module, dependency)`` pairs where a module of ``layer`` imports a project module
    outside ``layer`` and ``allowed``."""
    inside = (layer, *allowed)
    return sorted((module, dep) for module, deps in graph.items()
                  if module == layer or module.startswith(layer + ".")
                  for dep in deps
                  if not any(dep == ok or dep.startswith(ok + ".") for ok in inside))


def test_environments_import_nothing_above_them():
    assert _layer_violations(_graph(), "agentcredit.envs", BELOW_ENVS) == []


def test_the_verifier_interface_imports_no_other_part_of_the_package():
    assert _layer_violations(_graph(), "agentcredit.verifier", ()) == []


def test_the_config_schema_imports_no_other_part_of_the_package():
    # the environments and estimators build their options with it, from below the config
    assert _layer_violations(_graph(), "agentcredit.config.schema", ()) == []


def test_the_layer_check_sees_an_environment_that_imports_the_trainer():
    graph = {"agentcredit.envs.toy": {"agentcredit.train.loop", "agentcredit.verifier.atoms"}}
    assert _layer_violations(graph, "agentcredit.envs", BELOW_ENVS) == \
        [("agentcredit.envs.toy", "agentcredit.train.loop")]


def _imports_into(graph: dict[str, set[str]], layer: str, targets: tuple[str, ...]
                  ) -> list[tuple[str, str]]:
    """``(module, dependency)`` pairs where a module of ``layer`` imports one of ``targets``
    (a module or anything under it)."""
    return sorted((module, dep) for module, deps in graph.items()
                  if module == layer or module.startswith(layer + ".")
                  for dep in deps if any(dep == t or dep.startswith(t + ".") for t in targets))


def test_rollouts_import_neither_credit_nor_the_trainer():
    assert _imports_into(_graph(), "agentcredit.rollout",
                         ("agentcredit.credit", "agentcredit.train")) == []


def test_credit_imports_neither_the_trainer_nor_the_environments():
    assert _imports_into(_graph(), "agentcredit.credit",
                         ("agentcredit.train", "agentcredit.envs")) == []


def test_the_conformance_suite_imports_neither_the_trainer_nor_the_environments():
    assert _imports_into(_graph(), "agentcredit.testing",
                         ("agentcredit.train", "agentcredit.envs")) == []


def test_the_run_package_imports_no_module_of_the_trainer():
    assert _imports_into(_graph(), "agentcredit.run", ("agentcredit.train",)) == []


def test_the_report_reads_runs_through_the_run_package_never_the_trainer():
    assert _imports_into(_graph(), "agentcredit.report", ("agentcredit.train",)) == []


#: the modules of ``train`` that ``integrations/`` may import (named in ``train/__init__.py``)
TRAIN_PUBLIC = ("agentcredit.train.build", "agentcredit.train.scoring.verifier_traces")


def test_integrations_import_only_the_public_modules_of_train():
    private = [(module, dep) for module, dep
               in _imports_into(_graph(), "agentcredit.integrations", ("agentcredit.train",))
               if dep not in TRAIN_PUBLIC]
    assert private == []


def test_the_train_package_names_its_public_modules():
    import agentcredit.train

    assert set(TRAIN_PUBLIC) <= _modules().keys()
    public = agentcredit.train.__doc__.split("The public modules", 1)[1].split("\n\n")[0]
    assert {f"agentcredit.train.{name}" for name in re.findall(r"``([\w.]+)``", public)} == \
        set(TRAIN_PUBLIC)


def test_the_import_check_sees_a_report_module_that_imports_the_trainer():
    graph = {"agentcredit.report.page": {"agentcredit.run.directory", "agentcredit.train.loop"},
             "agentcredit.reporting": {"agentcredit.train.loop"},
             "agentcredit.run.directory": {"agentcredit.train.build"}}
    assert _imports_into(graph, "agentcredit.report", ("agentcredit.train",)) == \
        [("agentcredit.report.page", "agentcredit.train.loop")]


def test_importing_the_run_package_and_the_train_packages_loads_no_torch():
    names = [name for name, path in _modules().items()
             if name == "agentcredit.run" or name.startswith("agentcredit.run.")
             or (name.split(".")[:2] == ["agentcredit", "train"] and path.name == "__init__.py")]
    assert "agentcredit.train.scoring" in names and "agentcredit.run.directory" in names
    code = ("import sys, importlib\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "assert 'torch' not in sys.modules, 'torch loaded'")
    subprocess.run([sys.executable, "-c", code], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


#: the most agentcredit modules ``import agentcredit.config`` may load
CONFIG_MODULES_MAX = 25
#: third-party engines of the environments (BM25 search, TextWorld, tau2's data)
ENGINE_PACKAGES = ("bm25s", "textworld", "alfworld", "tau2")


def test_the_config_loads_a_few_modules_and_no_environment_engine():
    """Importing the config and loading a run config of every environment imports no engine:
    the environments' options modules import none, and engines load when a suite is built."""
    code = ("import sys\n"
            "from agentcredit.config import TrainConfig, load_config\n"
            "ours = [m for m in sys.modules if m.split('.')[0] == 'agentcredit']\n"
            f"assert len(ours) <= {CONFIG_MODULES_MAX}, sorted(ours)\n"
            "for env in ('alfworld', 'webshop', 'searchqa', 'tau-retail', 'tau-airline'):\n"
            "    load_config(None, [f'env={env}'])\n"
            "engines = sorted(m for m in sys.modules if m.endswith('.engine')\n"
            f"                 or m.split('.')[0] in {ENGINE_PACKAGES!r})\n"
            "assert not engines, engines\n")
    subprocess.run([sys.executable, "-c", code], check=True,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
