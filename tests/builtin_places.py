"""Every place a new built-in environment or estimator must be named, and nothing else
(docs/extending.md, "Adding a built-in"). ``tests/test_builtin_places.py`` checks that each
built-in is named in each place, and that no other module branches on an environment's name.

A plug-in names itself only in its own package (its module and its entry point); a built-in
is a plug-in that ships inside agentcredit, so beside its own files it is named where the
package lists what it ships.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Place:
    """A file that must name a new built-in, and why; ``by_module``: it names the module
    under ``credit/`` that registers the estimator, not the estimator."""

    path: str
    why: str
    by_module: bool = False


#: a new built-in estimator: its own module under ``credit/`` (the ``@register_estimator`` call
#: with its config, ``needs`` and ``claims``), and:
ESTIMATOR_PLACES = (
    Place("src/agentcredit/credit/__init__.py",
          "the import of its module, which registers it", by_module=True),
    Place("src/agentcredit/plugins.py",
          "BUILTIN_ESTIMATORS: --help lists it without importing torch"),
    Place("docs/design.md", "the estimator table: its config, inputs and claims"),
    Place("tests/credit/test_registry.py", "REGISTERED: what a fresh import registers"),
)

#: a new built-in environment: its own package under ``envs/`` (engine, tasks, verifier,
#: ``options.py`` importing no engine, its solver and planner), and:
ENVIRONMENT_PLACES = (
    Place("src/agentcredit/envs/suites.py",
          "its suite class and the register_environment call with its hooks"),
)

#: modules that name environments as data, not as wiring: (module, the name it holds them in)
ENVIRONMENT_DATA = (
    ("src/agentcredit/train/evaluation/credit_check/regimes.py", "PAPER_TABLE12"),
)
