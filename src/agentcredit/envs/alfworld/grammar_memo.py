"""Memoise TextWorld's grammar parsing and PDDL translation, which dominate ALFWorld.

TextWorld's PDDL text generator re-parses the same grammar strings (action
templates, feedback rules, the conditions of every production) with TatSu on
every step: profiling showed over 90% of a step there. The parse of a string
never changes, so ``enable()`` caches it:

- ``textgen._parse_and_convert``: the TatSu model of each (text, rule) is parsed
  once; each call still builds fresh symbols from it, because the text generator
  mutates the symbols it gets.
- ``textgen.Rule.parse_conjunctive_query``: the parsed query ``Rule`` is reused;
  TextWorld only reads it.
- ``textgen.copy_context``: the derivation copies its context (the entities bound
  to the grammar's variables) for every symbol, with ``deepcopy``: half of a step
  once the parses are cached. The copies need their own dicts (``query`` extends
  them) but not their own entities: the grammar only reads them (``{r.name}``,
  ``{o.indefinite}``, ...), so the dicts are copied and the entities shared.
- ``fast_downward.pddl2sas`` as ``textworld.envs.pddl.logic`` calls it: every
  ``PddlEnv.load`` and ``reset`` builds a ``PddlState``, which translates the same
  domain and problem to SAS twice (plain and optimised, ~0.15 s each: most of a
  reset, and a demonstration resets its game three times). The translation is a
  pure function of its arguments, so the last ``_TRANSLATIONS`` of them are kept;
  ``PddlState`` only reads the translated task, and each state still loads the SAS
  text into its own planner library, so every reset starts from the initial state.

Only the ``textworld.envs.pddl.textgen`` and ``textworld.envs.pddl.logic`` modules'
references are replaced, so nothing else in TextWorld (or Fast Downward) changes.
This relies on TextWorld internals and is tested against the pinned version
(``textworld==1.7.0``): the memoised engine must produce the same observations,
admissible commands and facts as the stock one
(``tests/envs/alfworld/test_grammar_memo.py``).
"""

from __future__ import annotations

import sys
from functools import cache, lru_cache

import fast_downward
import textworld
from textworld.envs.pddl import logic as pddl_logic
from textworld.envs.pddl import textgen

SUPPORTED_TEXTWORLD = "1.7.0"
_STOCK = {"parse": textgen._parse_and_convert, "Rule": textgen.Rule,
          "copy_context": textgen.copy_context, "fast_downward": pddl_logic.fast_downward}
_TRANSLATIONS = 64
"""Translations kept (two per game: ~0.2 MB a game)."""


@cache
def _parsed(text: str, rule_name: str, trace: bool):
    return textgen._PARSER.parse(text, rule_name=rule_name, trace=trace)


def _memo_parse_and_convert(text: str, rule_name: str, trace: bool = False):
    return textgen._Converter().walk(_parsed(text, rule_name, bool(trace)))


def _copy_context(context: dict) -> dict:
    return {"state": context["state"], "facts": context["facts"],
            "variables": dict(context["variables"]), "mapping": dict(context["mapping"]),
            "entity_infos": context["entity_infos"]}


class _MemoRule:
    """Stands in for ``textworld.logic.Rule`` inside ``textgen`` with a cached query parser."""

    parse_conjunctive_query = staticmethod(lru_cache(maxsize=None)(
        _STOCK["Rule"].parse_conjunctive_query))


@lru_cache(maxsize=_TRANSLATIONS)
def _pddl2sas(domain: str, problem: str, *args, **kwargs):
    """``fast_downward.pddl2sas``, cached, with the caller's ``sys.argv`` kept: the stock
    translator overwrites it with its own command line on every call."""
    argv = list(sys.argv)
    try:
        return fast_downward.pddl2sas(domain, problem, *args, **kwargs)
    finally:
        sys.argv[:] = argv


class _MemoDownward:
    """Stands in for the ``fast_downward`` module inside ``textworld.envs.pddl.logic``
    with a cached ``pddl2sas``; every other name is the module's own."""

    pddl2sas = staticmethod(_pddl2sas)

    def __getattr__(self, name: str):
        return getattr(fast_downward, name)


_MEMO_DOWNWARD = _MemoDownward()


def enable() -> None:
    """Switch the memo on (idempotent). Raises on an untested TextWorld version."""
    if textworld.__version__ != SUPPORTED_TEXTWORLD:
        raise RuntimeError(f"the grammar memo is tested on textworld=={SUPPORTED_TEXTWORLD}, "
                           f"found {textworld.__version__}; install that version or pass "
                           "memoize=False")
    textgen._parse_and_convert = _memo_parse_and_convert
    textgen.Rule = _MemoRule
    textgen.copy_context = _copy_context
    pddl_logic.fast_downward = _MEMO_DOWNWARD


def disable() -> None:
    """Restore TextWorld's own parsing and translation."""
    textgen._parse_and_convert = _STOCK["parse"]
    textgen.Rule = _STOCK["Rule"]
    textgen.copy_context = _STOCK["copy_context"]
    pddl_logic.fast_downward = _STOCK["fast_downward"]


def enabled() -> bool:
    """Whether the memo is on."""
    return (textgen._parse_and_convert is _memo_parse_and_convert
            and pddl_logic.fast_downward is _MEMO_DOWNWARD)
