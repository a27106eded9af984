"""Typed dataclass configs from plain data: one loader, one range rule, one "did you mean".

Every config of the project — the run's sections, each estimator's options, each
environment's options — is a dataclass whose fields carry a type hint and a doc
line. This module turns nested plain data (YAML, ``key=value`` overrides) into
those dataclasses and back, and checks them in one way:

- ``build(cls, data, prefix)`` coerces each value to its field's type (ints widen
  to floats, ``Literal`` choices, lists, nested dataclasses), names the full
  dotted key in every error, and validates what it built (a plug-in's options
  too, whether or not their class calls ``validate`` itself);
- a field typed as a union of dataclasses that declare ``config_name`` is chosen
  by its ``name`` key (``backbone: {name: gigpo, mode: mean_norm}``; a bare string
  is short for ``{name: ...}``);
- ``validate(self)``, called from ``__post_init__`` so that a config built in Python is
  checked exactly like one loaded from YAML, applies the rules below;
- ``did_you_mean(word, known)`` is the one place that suggests a spelling.

The rules ``validate`` applies to every field:

- **Ranges.** Every numeric field (``int``, ``float``, or either or ``None``) has a range
  in the class's ``_limits`` (``{"lr": (0.0, 1.0)}``, bounds inclusive; a third item
  ``"open"`` excludes the lower bound: ``(0.0, 1.0, "open")`` is ``(0, 1]``). The
  upper bound is generous, 10 to 100 times the largest value a run would sensibly
  use, so that a billion where a handful was meant is refused at load instead of
  running for hours. ``config --list`` shows each range
  (``allowed_range``). A bound is ``None`` (no bound on that side) only for a field the
  class's ``_unbounded`` mapping names, field → why no value on that side does harm
  (``{"grad_clip": "a clip above the gradient's norm only turns clipping off"}``);
  ``config --list`` prints the reason. tests/config/test_schema.py holds every class to
  this and walks every key of the run config, of every environment's options and of
  every estimator's options with ±10^12, expecting it refused unless ``_unbounded`` leaves
  that side open. NaN and ±inf are always refused.
- **Text.** A string (or a list of strings) holds no control character (NUL, newline,
  tab, DEL, C1): no name, path, URL or device needs one, and a NUL reaches the file
  system as an internal error.
- **URLs.** A field named in the class's ``_urls`` is empty or parses as
  ``http(s)://host[:port]/...``: a host free of spaces and control characters, a port
  from 1 to 65535 when given (``url_problem``).

Every problem raises ``ConfigError``, a one-line message naming the key, the bad
value and what is allowed. This module imports no other agentcredit module, so the
environments' and estimators' option dataclasses use it from below the rest of the config
package.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
import urllib.parse
from collections.abc import Iterable
from typing import Any, Literal


class ConfigError(ValueError):
    """A bad configuration; the message is one line that says what to change."""


def did_you_mean(word: str, known: Iterable[str], cutoff: float = 0.6) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``known`` to ``word``, else ``""``."""
    close = difflib.get_close_matches(str(word), list(known), n=1, cutoff=cutoff)
    return f"; did you mean {close[0]!r}?" if close else ""


def validate(obj: Any) -> None:
    """Check a config dataclass's values: ``Literal`` choices, finite numbers, ``_limits``,
    text free of control characters, ``_urls`` (the module's rules).

    A selectable field given as a name or a mapping (``backbone="gigpo"``) is built here.

    Configs call it from ``__post_init__``, so one built in Python is checked like one
    loaded from YAML. Messages start with ``ClassName.field``; ``build`` replaces that
    with the dotted key the user wrote.

    Raises:
        ConfigError: ``"Cls.field = value is out of range; allowed [low, high]"`` and the like.
    """
    cls = type(obj)
    limits = getattr(cls, "_limits", {})
    urls = getattr(cls, "_urls", ())
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        key = f"{cls.__name__}.{f.name}"
        hint = hints[f.name]
        choices = selectable(hint)
        if choices is not None and isinstance(value, str | dict):  # `backbone="gigpo"`
            value = _select(choices, value, key)
            object.__setattr__(obj, f.name, value)
        if choices is not None and not isinstance(value, tuple(choices.values())):
            raise ConfigError(f"{key} = {value!r} must name one of {', '.join(choices)}")
        if typing.get_origin(hint) is Literal and value not in typing.get_args(hint):
            choices = typing.get_args(hint)
            raise ConfigError(f"{key} = {value!r} is not allowed; choose one of "
                              f"{', '.join(map(str, choices))}"
                              f"{did_you_mean(str(value), map(str, choices))}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key} = {value!r} must be a finite number")
        texts = [value] if isinstance(value, str) else \
            [v for v in value if isinstance(v, str)] if isinstance(value, list | tuple) else []
        for text in texts:
            control = next((c for c in text if _is_control(c)), None)
            if control is not None:
                raise ConfigError(f"{key} = {value!r} holds the control character {control!r}, "
                                  "which no name, path or URL may hold; give plain text")
        if f.name in urls and value:
            problem = url_problem(value)
            if problem:
                raise ConfigError(f"{key} = {value!r} must be an http(s) URL such as "
                                  f"http://localhost:8000/v1 ({problem})")
        if f.name not in limits or value is None:
            continue
        low, high, *open_low = limits[f.name]
        too_low = low is not None and (value <= low if open_low else value < low)
        if too_low or (high is not None and value > high):
            raise ConfigError(f"{key} = {value!r} is out of range; allowed "
                              f"{allowed_range(cls, f.name)}")


def allowed_range(cls: type, name: str) -> str:
    """The values the field ``name`` of ``cls`` may take, as ``config --list`` and the range
    errors write them: ``[1, 100]``, ``(0.0, 1.0]`` (an open lower bound), ``[0.0, inf]``
    (a side ``_unbounded`` leaves open); ``""`` for a field without a range."""
    limit = getattr(cls, "_limits", {}).get(name)
    if limit is None:
        return ""
    low, high, *open_low = limit
    return (f"{'(' if open_low else '['}{'-inf' if low is None else low}, "
            f"{'inf' if high is None else high}]")


def _is_control(char: str) -> bool:
    """C0 controls (NUL, tab, newline …), DEL and the C1 controls."""
    return ord(char) < 32 or 127 <= ord(char) < 160


def url_problem(url: str) -> str:
    """Why ``url`` cannot be requested (``"no host"``, ``"the port is out of range 1-65535"``),
    or ``""``: what the HTTP clients would otherwise find only at their first request."""
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        return "it holds a space or a control character"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as err:  # Python's "Port out of range 0-65535" would allow port 0
        return "the port is out of range 1-65535" if "out of range" in str(err) else str(err)
    if parts.scheme not in ("http", "https"):
        return f"the scheme is {parts.scheme or 'missing'!r}, not http or https"
    if not parts.hostname:
        return "no host"
    if port == 0:
        return "the port is out of range 1-65535"
    return ""


def field_docs(cls: type) -> dict[str, str]:
    """The doc line under each field of the dataclass ``cls`` and its bases (from their
    source), by name; a class built in code gives its lines in a ``FIELD_DOCS`` mapping."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):
        docs.update(_source_docs(klass))
        docs.update(vars(klass).get("FIELD_DOCS", {}))
    return docs


def _source_docs(cls: type) -> dict[str, str]:
    import ast
    import inspect
    import itertools
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body
    docs = {}
    for node, after in itertools.pairwise(body):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                and isinstance(after.value.value, str):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def selectable(hint: Any) -> dict[str, type] | None:
    """For a union of dataclasses that declare ``config_name``: name → class; else None."""
    if typing.get_origin(hint) not in (types.UnionType, typing.Union):
        return None
    options = [a for a in typing.get_args(hint) if a is not type(None)]
    if options and all(dataclasses.is_dataclass(a) and hasattr(a, "config_name")
                       for a in options):
        return {a.config_name: a for a in options}
    return None


def build(cls: type, data: Any, prefix: str = "") -> Any:
    """The dataclass ``cls`` built from the mapping ``data``; errors name ``prefix + key``."""
    where = prefix.rstrip(".") or "the config"
    if data is None:
        data = {}
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    if not isinstance(data, dict) and prefix:  # `run=5`: a value given for a whole section
        example = (f"for example {where}.name={data}; " if "name" in names else
                   f"for example {where}.{names[0]}=...; " if names else "")
        raise ConfigError(f"{where} = {data!r} gives a value to a section, which takes keys; "
                          f"set one of them ({example}config --list shows them all)")
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping of keys, got {data!r}")
    hints = typing.get_type_hints(cls)
    for key, value in data.items():
        if key not in names:
            while isinstance(value, dict) and len(value) == 1:  # name the leaf the user meant
                (leaf, value), = value.items()
                key = f"{key}.{leaf}"
            raise ConfigError(f"unknown config key '{prefix}{key}'{_key_hint(cls, prefix, key)}")
    kwargs = {name: coerce(hints[name], value, f"{prefix}{name}")
              for name, value in data.items()}
    try:
        built = cls(**kwargs)
        validate(built)  # again for a class whose __post_init__ does not (a plug-in's options)
        return built
    except ConfigError as err:  # from validate(): name the key as the user wrote it
        raise ConfigError(str(err).replace(f"{cls.__name__}.", prefix, 1)) from None
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{where}: {str(err).splitlines()[0]}") from None


def _key_hint(cls: type, prefix: str, key: str) -> str:
    """A "did you mean" for an unknown dotted key: the closest key of ``cls``, else a key
    with the same leaf name (a typo in the section name), else the keys ``cls`` takes."""
    keys = [prefix + k for k, _, _ in leaf_keys(cls)]
    hint = did_you_mean(prefix + key, keys)
    if hint:
        return hint
    leaf = key.rsplit(".", 1)[-1]
    same_leaf = [k for k in keys if k.rsplit(".", 1)[-1] == leaf]
    if same_leaf:
        return f"; did you mean {same_leaf[0]!r}?"
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    return f" ({prefix.rstrip('.') or 'the config'} takes: {', '.join(names) or 'no options'})"


def coerce(hint: Any, value: Any, key: str) -> Any:
    """``value`` checked against the type ``hint`` (ints widen to floats); one line if bad."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        if dataclasses.is_dataclass(value) and isinstance(value, hint):
            return value
        return build(hint, value, key + ".")
    choices = selectable(hint)
    if choices is not None:
        return _select(choices, value, key)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return coerce(inner[0], value, key)
    if origin is Literal:
        if value is True or value is False:  # YAML 1.1 reads off / on as booleans
            value = "on" if value else "off"
        if value not in args:
            raise ConfigError(f"{key} = {value!r} is not allowed; choose one of "
                              f"{', '.join(map(str, args))}"
                              f"{did_you_mean(str(value), map(str, args))}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} = {value!r} must be true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} = {value!r} must be an integer")
        return value
    if hint is float:
        if isinstance(value, str):  # YAML 1.1 reads `1e-6` (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{key} = {value!r} must be a number")
        if not math.isfinite(value):
            raise ConfigError(f"{key} = {value!r} must be a finite number")
        return float(value)
    if hint is str:
        if isinstance(value, bool) and "options" in key:
            return "on" if value else "off"
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ConfigError(f"{key} = {value!r} must be a string")
        return str(value)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key} = {value!r} must be a list")
        return [coerce(args[0], v, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{key} = {value!r} must be a list")
        return tuple(coerce(args[0], v, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {value!r} must be a mapping")
        return dict(value)
    return value


def _select(choices: dict[str, type], value: Any, key: str) -> Any:
    """Build the member of a selectable union that ``value``'s ``name`` picks."""
    if any(isinstance(value, c) for c in choices.values()):
        return value
    if isinstance(value, str):
        value = {"name": value}
    if isinstance(value, dict) and "name" not in value:  # the one member with these keys
        fits = [n for n, c in choices.items()
                if set(value) <= {f.name for f in dataclasses.fields(c)}]
        if len(fits) == 1:
            value = {"name": fits[0], **value}
    if not isinstance(value, dict) or "name" not in value:
        raise ConfigError(f"{key} = {value!r} must name one of {', '.join(choices)} "
                          f"(for example {key}.name={next(iter(choices))})")
    data = dict(value)
    name = data.pop("name")
    if name not in choices:
        raise ConfigError(f"{key}.name = {name!r} is not allowed; choose one of "
                          f"{', '.join(choices)}{did_you_mean(str(name), choices)}")
    return build(choices[name], data, key + ".")


def to_dict(obj: Any) -> Any:
    """Plain nested data of a config (the inverse of ``build``; selectable members carry
    ``name``)."""
    if not dataclasses.is_dataclass(obj):
        if isinstance(obj, list | tuple):
            return [to_dict(v) for v in obj]
        if isinstance(obj, dict):
            return {k: to_dict(v) for k, v in obj.items()}
        return obj
    out = {}
    if hasattr(type(obj), "config_name"):
        out["name"] = type(obj).config_name
    for f in dataclasses.fields(obj):
        out[f.name] = to_dict(getattr(obj, f.name))
    return out


def leaf_keys(cls: type, prefix: str = "") -> list[tuple[str, type, str]]:
    """Every dotted key of the dataclass ``cls`` with its type hint and doc line."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    out = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        hint = hints[f.name]
        out.append((key, hint, docs.get(f.name, "")))
        if dataclasses.is_dataclass(hint):
            out += leaf_keys(hint, key + ".")
    return out


SEED_MAX = 2**32 - 1
"""The largest seed of every ``seed`` key: numpy's generators take 32-bit seeds."""

MAX_BACKOFF_S = 3600.0
"""The most seconds of back-off a client may plan for one request, all retries together."""


def refuse_long_backoff(owner: str, retries: int, backoff_s: float) -> None:
    """Refuse ``retries`` retries whose doubling back-off from ``backoff_s`` adds up to more
    than ``MAX_BACKOFF_S`` (``retries: 40`` from 1 s plans about 35,000 years).

    Raises:
        ConfigError: naming ``owner``'s key, the back-off planned and the bound.
    """
    planned = backoff_s * (2 ** retries - 1)
    if planned > MAX_BACKOFF_S:
        raise ConfigError(f"{owner}.retries = {retries} with a back-off of {backoff_s:g} s "
                          f"doubling at each retry plans {planned:,.0f} s of waiting, more than "
                          f"the {MAX_BACKOFF_S:,.0f} s allowed; lower retries (or backoff_s)")
