"""Memoise TextWorld's grammar parsing, which dominates an ALFWorld step.

TextWorld's PDDL text generator re-parses the same grammar strings (action
templates, feedback rules, the conditions of every production) with TatSu on
every step: profiling showed over 90% of a step there. The parse of a string
never changes, so ``enable()`` caches it:

- ``textgen._parse_and_convert``: the TatSu model of each (text, rule) is parsed
  once; each call still builds fresh symbols from it, because the text generator
  mutates the symbols it gets.
- ``textgen.Rule.parse_conjunctive_query``: the parsed query ``Rule`` is reused;
  TextWorld only reads it.

Only the ``textworld.envs.pddl.textgen`` module's references are replaced, so
nothing else in TextWorld changes. This relies on TextWorld internals and is
tested against the pinned version (``textworld==1.7.0``): the memoised engine
must produce the same observations, admissible commands and facts as the stock
one (``tests/envs/alfworld/test_grammar_memo.py``).
"""

from __future__ import annotations

from functools import cache, lru_cache

import textworld
from textworld.envs.pddl import textgen

SUPPORTED_TEXTWORLD = "1.7.0"
_STOCK = {"parse": textgen._parse_and_convert, "Rule": textgen.Rule}


@cache
def _parsed(text: str, rule_name: str, trace: bool):
    return textgen._PARSER.parse(text, rule_name=rule_name, trace=trace)


def _memo_parse_and_convert(text: str, rule_name: str, trace: bool = False):
    return textgen._Converter().walk(_parsed(text, rule_name, bool(trace)))


class _MemoRule:
    """Stands in for ``textworld.logic.Rule`` inside ``textgen`` with a cached query parser."""

    parse_conjunctive_query = staticmethod(lru_cache(maxsize=None)(
        _STOCK["Rule"].parse_conjunctive_query))


def enable() -> None:
    """Switch the memo on (idempotent). Raises on an untested TextWorld version."""
    if textworld.__version__ != SUPPORTED_TEXTWORLD:
        raise RuntimeError(f"the grammar memo is tested on textworld=={SUPPORTED_TEXTWORLD}, "
                           f"found {textworld.__version__}; install that version or pass "
                           "memoize_grammar=False")
    textgen._parse_and_convert = _memo_parse_and_convert
    textgen.Rule = _MemoRule


def disable() -> None:
    """Restore TextWorld's own parsing."""
    textgen._parse_and_convert = _STOCK["parse"]
    textgen.Rule = _STOCK["Rule"]


def enabled() -> bool:
    """Whether the memo is on."""
    return textgen._parse_and_convert is _memo_parse_and_convert
