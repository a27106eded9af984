"""A model folder checked before it is loaded: its settings run no code, its weights are the model.

Used by ``load_policy`` for every local folder and by ``RunDirectory.resume`` for
each checkpoint's ``policy/`` (so a damaged newest checkpoint falls back to the one
before). ``settings_problem`` reads ``config.json`` and ``tokenizer_config.json``
as bounded JSON through ``read_regular`` and refuses an ``auto_map`` key, which
asks transformers to import Python shipped in the folder; every other text file
transformers may read (``tokenizer.json``, ``chat_template.jinja``, ``merges.txt``,
``tokenizer.model``, ``generation_config.json``: ``TEXT_SUFFIXES``, at the top of the folder
and in ``additional_chat_templates/``) must be a regular file of the folder's own (no link,
no FIFO or device, which transformers would skip unsaid, or wait on, or read without end) of
at most ``TEXT_LIMIT`` bytes, checked without reading it. ``weights_problem``
takes weights only from the folder's own ``*.safetensors`` files (no link, no
pickled ``.bin``): the architecture that ``config.json`` names is built on torch's
``meta`` device (no memory for values), and every parameter it has must be in the
files with its shape and hold only finite values. Each check answers with a
clause saying what is wrong (``"its policy/model.safetensors holds no tensors"``)
or ``""``, for the caller to put in its one line. ``model_size`` reads the same architecture's
parameter count, vocabulary and decoder shapes, for the memory estimate made before the
weights load.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from safetensors import SafetensorError, safe_open

from agentcredit.config.checks import ModelSize
from agentcredit.envs.bounded_json import JsonRefused, loads
from agentcredit.error_text import first_line
from agentcredit.run.safe_files import read_regular, refusal

SETTINGS = ("config.json", "tokenizer_config.json")
SETTINGS_LIMIT = 16 << 20
"""Largest ``config.json`` / ``tokenizer_config.json`` read (a chat template can be long)."""
REMOTE_CODE_KEY = "auto_map"
TEXT_SUFFIXES = (".json", ".jinja", ".txt", ".model")
"""The model folder's files transformers may read as settings, tokenizer or chat template."""
TEXT_LIMIT = 128 << 20
"""Largest such file (the largest released ``tokenizer.json``, Gemma 3's, is about 33 MB)."""
CHAT_TEMPLATES = "additional_chat_templates"
ARCHITECTURE_LIMITS = {
    "num_hidden_layers": (1, 1024), "hidden_size": (1, 1 << 17), "intermediate_size": (1, 1 << 20),
    "num_attention_heads": (1, 4096), "num_key_value_heads": (1, 4096), "head_dim": (1, 4096),
    "vocab_size": (1, 1 << 23), "max_position_embeddings": (1, 1 << 28),
}
"""Ranges of a ``config.json``'s sizes, each well above any released model's (405B Llama:
126 layers, width 16,384; the largest vocabularies about 260k, contexts about 10M tokens)."""
# A hub repo id is `name` or `owner/name` of letters, digits, `-`, `_`, `.`.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def looks_local(name_or_dir: str) -> bool:
    """True for strings that can only mean a filesystem path, never a hub repo id.

    ``runs/tiny`` has the ``owner/name`` form of a hub id, but when a local folder
    ``runs`` exists it is read as a path (so a typo fails at once, without hub retries).
    """
    return (
        name_or_dir.startswith(("/", "./", "../", "~", "."))
        or "\\" in name_or_dir
        or name_or_dir.endswith("/")
        or not _HUB_ID.match(name_or_dir)
        or ("/" in name_or_dir and Path(name_or_dir.split("/", 1)[0]).is_dir())
    )


def read_settings(path: Path) -> dict[str, Any]:
    """A model folder's JSON settings file as a mapping.

    Raises:
        ValueError: a clause naming the file: a link or special file, too large, not bounded
            JSON, not a mapping, or holding ``auto_map`` (code of the folder's own).
    """
    try:
        data = loads(read_regular(path, SETTINGS_LIMIT))
    except (OSError, JsonRefused) as err:
        raise ValueError(f"its {path.name} does not load ({err})") from None
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ValueError(f"its {path.name} holds {kind}, not a mapping of settings")  # noqa: TRY004
    if REMOTE_CODE_KEY in data:
        raise ValueError(f"its {path.name} has an {REMOTE_CODE_KEY!r} key, which asks to run "
                         "Python code shipped in the folder; agentcredit never runs a model's "
                         f"own code (trust_remote_code is off): remove {REMOTE_CODE_KEY!r} or "
                         "use a model whose architecture transformers ships")
    return data


def settings_problem(folder: Path) -> str:
    """Why the settings files of ``folder`` may not be read (see ``read_settings``), or ``""``.
    ``config.json`` is required; ``tokenizer_config.json`` is checked when present, and so is
    every text file (``text_files_problem``)."""
    for name in SETTINGS:
        path = folder / name
        if name != "config.json" and not (path.exists() or path.is_symlink()):
            continue
        try:
            read_settings(path)
        except ValueError as err:
            return str(err)
    return text_files_problem(folder)


def text_files_problem(folder: Path) -> str:
    """Why a file of ``folder`` that transformers may read as text (``TEXT_SUFFIXES``) may
    not be read: a symlink, a special file, or more than ``TEXT_LIMIT`` bytes; or ``""``.
    Nothing is read."""
    templates = folder / CHAT_TEMPLATES
    if templates.is_symlink():
        return (f"its {CHAT_TEMPLATES}/ is a symlink (to {os.readlink(templates)}); a model's "
                "files are read only from the folder itself: put the folder there")
    paths = [*folder.iterdir(), *(templates.iterdir() if templates.is_dir() else [])]
    for path in sorted(p for p in paths if p.suffix in TEXT_SUFFIXES):
        name = path.relative_to(folder).as_posix()
        why = refusal(path)
        if why:
            return f"its {name} is refused: {why}"
        size = path.lstat().st_size
        if size > TEXT_LIMIT:
            return (f"its {name} holds {size:,} bytes, more than the {TEXT_LIMIT:,} a model's "
                    "settings or tokenizer file may hold; copy the model's own file there")
    return ""


def weights_problem(folder: Path) -> str:
    """Why the weights of the model folder ``folder`` are not the model its ``config.json``
    describes, or ``""``; see the module docstring for what is checked."""
    problem = settings_problem(folder)
    if problem:
        return problem
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickled = sorted(p.name for p in folder.glob("*.bin"))
        return ("it holds no .safetensors weights" + (
            f" ({', '.join(pickled)} is pickled and is never loaded: save the model with "
            "safe_serialization)" if pickled else ""))
    saved: dict[str, tuple[int, ...]] = {}
    for weights in files:
        why = refusal(weights)
        if why:
            return f"its {weights.name} is refused: {why}"
        try:
            with safe_open(weights, "pt") as handle:
                for key in handle.keys():  # noqa: SIM118 (safe_open has no iteration)
                    saved[key] = tuple(handle.get_slice(key).get_shape())
        except (OSError, SafetensorError) as err:
            return f"its {weights.name} does not load ({first_line(err)})"
    if not saved:
        return f"its {', '.join(p.name for p in files)} holds no tensors"
    try:
        expected = parameter_shapes(folder)
    except ValueError as err:
        return str(err)
    missing = [name for name in expected if name not in saved]
    if missing:
        return (f"the weights lack {len(missing)} of the {len(expected)} parameters of the "
                f"model (first: {missing[0]}); loading would leave them random")
    wrong = [name for name, shape in expected.items() if saved[name] != shape]
    if wrong:
        name = wrong[0]
        return (f"the weights give {name} the shape {list(saved[name])}, the model's config.json "
                f"needs {list(expected[name])} ({len(wrong)} parameters of the wrong shape)")
    return _nonfinite(files, set(expected))


def parameter_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """Every parameter name and shape of the model ``config.json`` describes (tied ones once,
    in ``model.parameters()`` order).

    Raises:
        ValueError: a clause saying why the architecture cannot be built.
    """
    return {name: tuple(p.shape) for name, p in _meta_model(folder, True).named_parameters()}


def model_size(source: str | Path, local_only: bool = True) -> ModelSize:
    """The shapes of the model whose ``config.json`` is at ``source`` (a folder, or a hub id
    whose ``config.json`` alone is fetched), known before any weight is read, for the memory
    estimate: the parameter count and vocabulary of the model built on the ``meta`` device,
    the decoder's widths, layers and heads from its (text) config, and whether its head is
    the input embedding.

    Raises:
        ValueError: a clause saying why the architecture cannot be built, or which size the
            estimate needs it does not give.
    """
    model = _meta_model(source, local_only)
    text = model.config.get_text_config()
    sizes = {}
    for field, key in (("hidden", "hidden_size"), ("intermediate", "intermediate_size"),
                       ("layers", "num_hidden_layers"), ("heads", "num_attention_heads")):
        value = getattr(text, key, None)
        if type(value) is not int or value < 1:
            raise ValueError(f"its config.json gives {key} = {value!r}, and the memory estimate "
                             "needs it as a positive integer (it sizes Qwen2 / Llama-style "
                             "decoders); use such a model")
        sizes[field] = value
    head = model.get_output_embeddings()
    embedding = model.get_input_embeddings().weight
    return ModelSize(parameters=sum(p.numel() for p in model.parameters()),
                     vocab=embedding.shape[0], **sizes,
                     kv_heads=getattr(text, "num_key_value_heads", None) or sizes["heads"],
                     head_dim=(getattr(text, "head_dim", None)
                               or sizes["hidden"] // sizes["heads"]),
                     tied=head is not None and head.weight is embedding)


def architecture_problem(settings: dict[str, Any]) -> str:
    """Why the sizes in a ``config.json`` (its top level, and a multimodal model's
    ``text_config``) are no architecture to build, or ``""``: each of ``ARCHITECTURE_LIMITS``
    an integer in its range, the attention heads dividing the width (unless ``head_dim`` is
    set) and the key/value heads dividing the heads. Checked before transformers reads the
    file: it would build a list as long as ``num_hidden_layers`` before any check of its own,
    and builds a model whose heads do not divide its width that fails only in its first
    forward pass."""
    for where, part in (("", settings), ("text_config.", settings.get("text_config"))):
        if not isinstance(part, dict):
            continue
        for key, (low, high) in ARCHITECTURE_LIMITS.items():
            value = part.get(key)
            if value is not None and (type(value) is not int or not low <= value <= high):
                return (f"its config.json {where}{key} = {value!r} is no size transformers can "
                        f"build; allowed an integer in [{low}, {high:,}]")
        width, heads, kv_heads = (part.get(key) for key in (
            "hidden_size", "num_attention_heads", "num_key_value_heads"))
        if heads and width and part.get("head_dim") is None and width % heads:
            return (f"its config.json {where}num_attention_heads = {heads} does not divide "
                    f"hidden_size = {width}; set a head count that divides it (or head_dim)")
        if heads and kv_heads and heads % kv_heads:
            return (f"its config.json {where}num_key_value_heads = {kv_heads} does not divide "
                    f"num_attention_heads = {heads}; set one that divides it")
    return ""


def _meta_model(source: str | Path, local_only: bool):
    """The model ``config.json`` at ``source`` describes, built on torch's ``meta`` device (no
    memory for values); its sizes checked first (``architecture_problem``)."""
    import torch
    from huggingface_hub.errors import StrictDataclassError
    from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

    try:
        if Path(source).is_dir():  # read bounded, as every settings file of a folder is
            settings = read_settings(Path(source) / "config.json")
        else:
            settings, _ = PretrainedConfig.get_config_dict(source, local_files_only=local_only)
    except OSError as err:
        raise ValueError(f"its config.json does not load ({first_line(err)})") from None
    problem = architecture_problem(settings)
    if problem:
        raise ValueError(problem)
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=local_only,
                                            trust_remote_code=False)
        with torch.device("meta"):
            return AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    except StrictDataclassError as err:  # the config class refused a value: its cause names it
        raise ValueError(f"its config.json is refused by the {settings.get('model_type')!r} "
                         f"architecture: {architecture_rejection(err)}") from None
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise ValueError("its config.json describes no model transformers can build "
                         f"({first_line(err)})") from None


def architecture_rejection(err: Exception) -> str:
    """The line of a transformers config class's ``StrictDataclassError`` that names the key
    (``"ValueError: `num_hidden_layers` (-1) must be equal to ..."``), its first line if none."""
    lines = [line.strip() for line in str(err).strip().splitlines()]
    return lines[1] if len(lines) > 1 else first_line(err)


def _nonfinite(files: list[Path], names: set[str]) -> str:
    """A clause naming the first parameter holding NaN or an infinity, or ``""``; tensors are
    read one at a time so the check needs memory for one."""
    import torch

    for weights in files:
        with safe_open(weights, "pt") as handle:
            for key in handle.keys():  # noqa: SIM118
                if key in names:
                    tensor = handle.get_tensor(key)
                    if tensor.is_floating_point() and not torch.isfinite(tensor).all():
                        return (f"its {weights.name} holds NaN or infinite values in {key} "
                                "(a diverged or damaged save)")
    return ""

