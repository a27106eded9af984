"""Loading a run config: YAML + ``key=value`` overrides, validated once.

``load_config(path, overrides)`` reads a YAML file (the packaged preset
``presets/embedded.yaml`` when ``path`` is None; a preset by name, ``--config hf``),
applies ``key=value`` overrides with dotted keys (``rollout.group_size=4``,
``credit.estimator=gigpo``; ``model=DIR`` is short for ``model.name=DIR`` and ``env=NAME``
for ``env.name=NAME``; ``method=NAME`` is short for a method's settings, ``config.methods``),
and validates everything once. Every problem raises ``ConfigError`` whose message is one line
naming the key, the bad value and what is allowed (an unknown key suggests the closest known
one; a key that moved names its new place).

The file is read as untrusted (``config/bounded_yaml.py``): a regular file of at most
``YAML_LIMIT`` bytes (a link the user names is followed; a FIFO or device is refused by
name), its aliases and nesting bounded, so a "billion laughs" file is refused unexpanded.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from agentcredit.config import bounded_yaml
from agentcredit.config.bounded_yaml import YAML_LIMIT
from agentcredit.config.checks import check_config
from agentcredit.config.environment import refuse_moved_keys
from agentcredit.config.methods import method_settings
from agentcredit.config.schema import ConfigError, build, leaf_keys, to_dict
from agentcredit.config.sections import TrainConfig

EMBEDDED_CONFIG = "embedded.yaml"
#: the sections whose name a bare value sets (``model=DIR``, ``env=NAME``); any other section
#: given a value (``run=5``) is refused: a section takes keys (``run.name=5``)
NAME_SHORTHANDS = ("model", "env")


def load_config(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()
                ) -> TrainConfig:
    """Read ``path`` (the packaged embedded default when None), apply overrides, validate.

    Raises:
        ConfigError: one line naming the bad key or value and what is allowed.
    """
    text, source = _config_text(path)
    try:
        data = bounded_yaml.loads(text) or {}
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else "parse error"
        raise ConfigError(f"{source} is not valid YAML ({first})") from None
    except ValueError as err:  # an alias expanded over and over, or nested too deep
        raise ConfigError(f"{source} {err}; a run config holds a few hundred values nested a "
                          "few levels deep: write the settings out plainly") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must hold a mapping of sections, got {type(data).__name__}")
    if "method" in data:  # the file's own method replaces the file's settings
        _apply_method(data, data.pop("method"))
    for override in overrides:
        key, sep, raw = override.partition("=")
        if sep and key.strip() == "method":
            _apply_method(data, raw.strip())
        else:
            apply_override(data, override)
    return config_from_dict(data)


def _config_text(path: str | Path | None) -> tuple[str, str]:
    """The YAML text of ``path`` and how to name it: a file, or a packaged preset by name
    (``hf``, ``embedded.yaml``) when no such file exists; ``None`` is the embedded default."""
    # the run layer's file checks load only when a file is read, so importing the config
    # stays light (tests/test_import_graph.py)
    from agentcredit.run.safe_files import UnsafeRunFile, read_regular

    packaged = resources.files("agentcredit.config") / "presets"
    name = EMBEDDED_CONFIG if path is None else str(path)
    preset = name if name.endswith(".yaml") else f"{name}.yaml"
    if path is None or (not Path(name).exists() and "/" not in name
                        and (packaged / preset).is_file()):
        return (packaged / preset).read_text(), f"the packaged {preset}"
    try:  # a link the user named is followed (their choice); a FIFO or device is refused
        return read_regular(name, YAML_LIMIT, follow=True).decode("utf-8"), name
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {name!r} is not UTF-8 text (byte {err.start}); pass a "
                          "YAML run config") from None
    except UnsafeRunFile as err:
        raise ConfigError(f"config file {name!r} is refused ({err}); pass a YAML run config "
                          "file") from None
    except OSError as err:
        presets = sorted(p.name for p in packaged.iterdir() if p.name.endswith(".yaml"))
        raise ConfigError(f"cannot read config file {name!r}: {err.strerror} (packaged "
                          f"presets: {', '.join(presets)})") from None


def _apply_method(data: dict, method: Any) -> None:
    for key, value in method_settings(method).items():
        _set_key(data, key, value)


def apply_override(data: dict, override: str) -> None:
    """Set ``a.b.c=value`` in the nested dict ``data``; the value is parsed as YAML."""
    key, sep, raw = override.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override {override!r} is not key=value (for example "
                          "rollout.group_size=4)")
    try:
        value = bounded_yaml.loads(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    except ValueError as err:
        raise ConfigError(f"override {key}: its value {err}; give a plain value") from None
    if key in NAME_SHORTHANDS and not isinstance(value, dict):
        key = f"{key}.name"  # `model=DIR` is short for `model.name=DIR`
    _set_key(data, key, value)


def _set_key(data: dict, key: str, value: Any) -> None:
    """Set the dotted ``key`` in the nested dict ``data``, creating sections on the way."""
    parts = key.split(".")
    node = data
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif isinstance(child, str):  # `backbone=gigpo` then `backbone.mode=...`
            child = node[part] = {"name": child}
        if not isinstance(child, dict):
            raise ConfigError(f"cannot set {key}: {'.'.join(parts[:depth + 1])} is a value, "
                              "not a section")
        node = child
    node[parts[-1]] = value


def config_from_dict(data: dict) -> TrainConfig:
    """Build and validate a ``TrainConfig`` from nested plain data."""
    refuse_moved_keys(data)
    config = build(TrainConfig, data)
    check_config(config)
    return config


def config_to_dict(config: TrainConfig) -> dict:
    """Plain nested data (the content of a run's ``config.yaml``), with the options of the
    selected environment only."""
    data = to_dict(config)
    for key in config.env.unselected_options:
        del data["env"][key]
    return data


def save_config(config: TrainConfig, path: Path) -> None:
    """Write ``config`` as YAML."""
    path.write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False))


def all_keys() -> list[str]:
    """Every dotted key of ``TrainConfig`` (sections and leaves)."""
    return [key for key, _, _ in leaf_keys(TrainConfig)]



def changed_keys(old: TrainConfig, new: TrainConfig) -> dict[str, tuple[Any, Any]]:
    """Every dotted leaf key whose value differs between two configs, as ``key → (old, new)``.

    Compares the plain data (``config_to_dict``), so method shorthands and an estimator's
    options are compared as the settings they stand for; a key present on one side only (an
    option of one estimator) has ``None`` on the other.
    """
    def flat(data: Any, prefix: str = "") -> dict[str, Any]:
        if not isinstance(data, dict):
            return {prefix.rstrip("."): data}
        return {k: v for key, value in data.items() for k, v in flat(value, f"{prefix}{key}.")
                .items()}

    before, after = flat(config_to_dict(old)), flat(config_to_dict(new))
    return {key: (before.get(key), after.get(key)) for key in [*before, *after]
            if before.get(key) != after.get(key)}
