"""YAML from a file that may be hostile, bounded in values and nesting: the config a user names
(``--config FILE``) and a run's ``config.yaml`` as the report reads it.

``yaml.safe_load`` builds no objects, but an alias is one node however often it is used, so
ten lines of anchors ("billion laughs") parse at once into a value that expands to 10^9 leaves
the first time anything walks it. ``loads`` copies the parsed value without recursion,
counting each use of an alias again, and refuses it past ``YAML_NODES`` values or
``MAX_DEPTH`` levels, before any expansion fills memory. The callers bound the file to
``YAML_LIMIT`` bytes before parsing it.
"""

from __future__ import annotations

from typing import Any

import yaml

from agentcredit.envs.bounded_json import MAX_DEPTH

YAML_LIMIT = 1 << 20
"""Most bytes of a YAML config read (one is about 5 kB)."""
YAML_NODES = 100_000
"""Most values (mappings, lists and scalars, aliases counted each time) in a YAML config."""
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when built with it


def loads(text: str) -> Any:
    """The plain data (dicts, lists, scalars) of the YAML ``text``, within the bounds.

    Raises:
        yaml.YAMLError: the text is not YAML.
        ValueError: a predicate (``"holds more than 100,000 values ..."``): see ``bounded_plain``.
    """
    return bounded_plain(yaml.load(text, Loader=_LOADER), YAML_NODES)


def bounded_plain(value: Any, max_nodes: int) -> Any:
    """A copy of the parsed YAML ``value``, walked without recursion; an alias is copied each
    time it is used, so an entity-expansion file hits the bound at once instead of filling
    memory.

    Raises:
        ValueError: a predicate: more than ``max_nodes`` values, or nested deeper than
            ``MAX_DEPTH``, or a key that is not plain text or a number.
    """
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, int]] = [(value, root, 0, 0)]
    nodes = 0
    while stack:
        node, parent, key, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise ValueError(f"holds more than {max_nodes:,} values (an alias expanded over "
                             "and over?)")
        if depth > MAX_DEPTH:
            raise ValueError(f"nests deeper than {MAX_DEPTH}")
        if isinstance(node, dict):
            copy: Any = {}
            for k, v in node.items():
                if not isinstance(k, str | int | float | bool) and k is not None:
                    raise ValueError(f"has a key of type {type(k).__name__}")
                copy[k] = None
                stack.append((v, copy, k, depth + 1))
        elif isinstance(node, list):
            copy = [None] * len(node)
            stack += [(v, copy, i, depth + 1) for i, v in enumerate(node)]
        else:
            copy = node
        parent[key] = copy
    return root[0]
