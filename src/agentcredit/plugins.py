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
missing. A name registered twice (a plug-in's environment ``alfworld`` beside the built-in, or
two plug-ins' ``doors``) is refused with one ``NameCollision`` line naming both providers
(``provider``). A leaf module: it imports no other part of agentcredit but
``config/schema.py``.
"""

from __future__ import annotations

from importlib import import_module, metadata

from agentcredit.config.schema import ConfigError

#: the entry-point group of environment plug-ins (``envs/suites.py`` loads it)
ENVIRONMENTS = "agentcredit.environments"
#: the entry-point group of estimator plug-ins (``credit/registry.py`` loads it)
ESTIMATORS = "agentcredit.estimators"
#: the estimators agentcredit registers itself (importing ``agentcredit.credit``), named here
#: so that listing them loads no torch (``listed_estimator_names``); ``register_estimator``
#: refuses a built-in estimator this does not name
BUILTIN_ESTIMATORS = ("grpo", "rloo", "gigpo", "vict", "dense_atom_reward", "commit_only",
                      "temporal_nearest", "random_edges", "no_core", "no_proof_edges", "adrs",
                      "rlsd", "salt", "hcapo", "proxmo")

_LOADED: set[str] = set()
#: the entry points being imported now, innermost last (``provider`` names the newest)
_LOADING: list[metadata.EntryPoint] = []


class PluginError(ConfigError):
    """A plug-in that cannot be loaded: one line naming the package and what to do."""


class NameCollision(PluginError):
    """A name registered by two providers: one line naming both and what to do (passed on by
    ``load_group`` as it is, since it already names the plug-in)."""


def entry_points(group: str) -> list[metadata.EntryPoint]:
    """The installed entry points of ``group``, sorted by name and target. Two distributions
    may give entry points the same name: both are loaded, so two that register one
    environment or estimator meet as a ``NameCollision``, never as one silently dropped (a
    distribution on the path twice is listed once, by ``importlib.metadata``)."""
    seen = {(point.name, point.value): point for point in metadata.entry_points(group=group)}
    return [seen[key] for key in sorted(seen)]


def listed_estimator_names() -> list[str]:
    """The estimator names, sorted, without importing an estimator (so without torch, for
    ``agentcredit --help``): the built-ins and each plug-in's entry-point name.
    ``credit.estimator_names`` imports them all and gives the names they register."""
    return sorted({*BUILTIN_ESTIMATORS, *(point.name for point in entry_points(ESTIMATORS))})


def package_of(point: metadata.EntryPoint) -> str:
    """The distribution that declares ``point`` (its module's top package when unknown)."""
    return point.dist.name if point.dist is not None else point.value.split(".")[0]


def provider(registered: object) -> str:
    """Who registers ``registered`` (a suite class, an estimator function) now, in words: the
    plug-in package and entry point being imported, else agentcredit's built-in or the module
    that defines it. Two registrations of one name by the same provider are one provider's
    (a module imported again after a failed load, or reloaded)."""
    module = getattr(registered, "__module__", None) or "?"
    where = f"{module}.{getattr(registered, '__qualname__', type(registered).__name__)}"
    if module.split(".")[0] == "agentcredit":  # also when a plug-in's import loads a built-in
        return f"agentcredit's built-in {where}"
    if _LOADING:
        point = _LOADING[-1]
        return (f"plug-in package {package_of(point)!r} (entry point {point.name} = "
                f"{point.value} in {point.group})")
    return f"module {where}"


def load_group(group: str) -> None:
    """Import every entry point of ``group`` once (their imports register them).

    Raises:
        PluginError: an entry point fails to import, naming its package and the error.
    """
    if group in _LOADED:
        return
    _LOADED.add(group)
    for point in entry_points(group):
        _LOADING.append(point)
        try:
            point.load()
        except NameCollision:
            _LOADED.discard(group)
            raise
        except Exception as error:
            _LOADED.discard(group)
            package = package_of(point)
            first = (str(error).strip().splitlines() or ["(no message)"])[0]
            raise PluginError(
                f"plug-in package {package!r} failed to load its {group} entry point "
                f"{point.name} = {point.value}: {type(error).__name__}: "
                f"{first}; fix the package or uninstall it "
                f"(pip uninstall {package})") from error
        finally:
            _LOADING.pop()


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
