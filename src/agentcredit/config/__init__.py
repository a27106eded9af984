"""The run configuration: dataclass sections, method presets, loading and checks; no torch.

A run is one ``TrainConfig`` (``sections``; its ``env`` section in ``environment``), read from a
YAML preset or file plus ``key=value`` overrides by ``load_config`` (``load``), with
``method=NAME`` expanded from ``METHODS`` (``methods``) and the cross-section checks of
``checks``. ``schema`` turns plain data into dataclasses and back for every config of the
project (``build``, ``validate``, ``ConfigError``); the YAML presets are in ``presets/``.

The names below load on first use: the environments' and estimators' option dataclasses
import ``agentcredit.config.schema``, and the sections import those dataclasses back, so
importing this package must not load the sections.
"""

from __future__ import annotations

import importlib

#: public name -> the module of this package that defines it
_EXPORTS = {
    **dict.fromkeys(("ConfigError", "build", "did_you_mean", "leaf_keys", "selectable",
                     "to_dict", "validate"), "schema"),
    **dict.fromkeys(("CreditConfig", "EvalConfig", "ModelConfig", "OptimConfig",
                     "RolloutConfig", "RunConfig", "SFTConfig", "SkillsConfig", "TrainConfig",
                     "estimator_config"), "sections"),
    "EnvConfig": "environment",
    "TinyModelConfig": "tiny_model",
    **dict.fromkeys(("METHODS", "METHOD_ALIASES", "method_settings"), "methods"),
    **dict.fromkeys(("all_keys", "apply_override", "changed_keys", "config_from_dict",
                     "config_to_dict", "load_config", "save_config"), "load"),
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentcredit.config' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


def __dir__() -> list[str]:
    return sorted(__all__)
