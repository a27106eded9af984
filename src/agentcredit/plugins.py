"""Plug-ins by entry point: environments and estimators from packages outside agentcredit
(docs/extending.md).

A package declares, in its ``pyproject.toml``::

    [project.entry-points."agentcredit.environments"]
    gridlock = "gridlock.plugin"          # importing it calls envs.suites.register_environment

    [project.entry-points."agentcredit.estimators"]
    last_step_bonus = "last_step_bonus"   # importing it runs @register_estimator

The registries (``envs/suites.py``, ``credit/registry.py``) call ``load_group`` the first
time they are asked for their names, so a plug-in is there before any config is checked, and
the built-ins register through the same functions. A plug-in that fails to import stops the
run with one ``PluginError`` line naming its package and entry point, never silently
missing. A leaf module: it imports no other part of agentcredit but ``config/schema.py``.
"""

from __future__ import annotations

from importlib import import_module, metadata

from agentcredit.config.schema import ConfigError

#: the entry-point group of environment plug-ins (``envs/suites.py`` loads it)
ENVIRONMENTS = "agentcredit.environments"
#: the entry-point group of estimator plug-ins (``credit/registry.py`` loads it)
ESTIMATORS = "agentcredit.estimators"

_LOADED: set[str] = set()


class PluginError(ConfigError):
    """A plug-in that cannot be loaded: one line naming the package and what to do."""


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The installed entry points of ``group``, sorted by name (one per name: the first
    distribution on the path wins, as ``importlib.metadata`` lists them)."""
    seen: dict[str, metadata.EntryPoint] = {}
    for point in metadata.entry_points(group=group):
        seen.setdefault(point.name, point)
    return [seen[name] for name in sorted(seen)]


def load_group(group: str) -> None:
    """Import every entry point of ``group`` once (their imports register them).

    Raises:
        PluginError: an entry point fails to import, naming its package and the error.
    """
    if group in _LOADED:
        return
    _LOADED.add(group)
    for point in entry_points(group):
        try:
            point.load()
        except Exception as error:
            _LOADED.discard(group)
            package = point.dist.name if point.dist is not None else point.value.split(".")[0]
            first = (str(error).strip().splitlines() or ["(no message)"])[0]
            raise PluginError(
                f"plug-in package {package!r} failed to load its {group} entry point "
                f"{point.name} = {point.value}: {type(error).__name__}: {first}; fix the "
                f"package or uninstall it (pip uninstall {package})") from error


def reset(group: str) -> None:
    """Forget that ``group`` was loaded, so the next lookup imports its entry points again
    (tests that put a package on the path)."""
    _LOADED.discard(group)


def load_reference(reference: str, what: str):
    """The object a ``"package.module:attribute"`` reference names, imported now (a hook of a
    registered environment, kept as text so registering imports no engine).

    Raises:
        PluginError: the module or attribute is missing, naming ``what`` it was for.
    """
    module_name, _, attribute = reference.partition(":")
    try:
        return getattr(import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise PluginError(f"{what}: cannot load {reference!r} ({type(error).__name__}: "
                          f"{error}); give 'package.module:name' of an importable object"
                          ) from error
