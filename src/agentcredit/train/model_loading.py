"""Load a policy model and its tokenizer, from a local directory or the Hugging Face hub.

Every command that loads a model (``train``, with its warm start and reference, ``eval``,
``audit``, ``credit-check``) loads it here, through ``build.load_model``. One path for every
checkpoint: the embedded tiny model written by
``bootstrap_tiny_model``, a directory written by our own checkpoints, and a hub
id such as ``Qwen/Qwen2.5-1.5B-Instruct`` all go through
``AutoModelForCausalLM.from_pretrained`` / ``AutoTokenizer.from_pretrained``.

Nothing a model ships runs: every load passes ``trust_remote_code=False`` and
``use_safetensors=True``, and a local folder is checked first
(``run/model_folder.py``: no ``auto_map``, weights only from its safetensors files,
every parameter present with its shape and finite). A hub model is checked after
loading: a parameter the files lacked (left at its random start) or a non-finite
one is refused. Before a hub id is loaded, one request of at most ``HUB_PROBE_SECONDS``
(no retries) asks the hub for its ``config.json``: a model the hub does not have, or one
neither cached nor reachable, is refused at once in one line (``from_pretrained`` alone retries
each file for half a minute); a cached model the hub cannot be asked about loads from the cache.
A model loaded to be trained is sized from its ``config.json`` (``model_size``) before any
weight is read or downloaded, and refused when the run's memory estimate for it is too large
(``check_size``; ``train/build.py``). The chat template is rendered once in Jinja's
sandbox, as every prompt will be, so a template that fails, or takes more than
``TEMPLATE_SECONDS`` to render two short messages, is refused before any work. So is a
tokenizer of more than ``MAX_VOCABULARY`` entries, one with an id the model's input embedding
has no row for, and one with neither a pad nor an EOS token.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import httpx
import torch
from huggingface_hub import (
    constants,
    get_hf_file_metadata,
    hf_hub_url,
    is_offline_mode,
    try_to_load_from_cache,
)
from huggingface_hub.errors import (
    HFValidationError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from safetensors import SafetensorError
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from agentcredit.config import ConfigError
from agentcredit.config.checks import ModelSize
from agentcredit.run.model_folder import (
    looks_local,
    model_size,
    settings_problem,
    weights_problem,
)


class ModelLoadError(ConfigError):
    """A model folder or hub id that cannot be loaded; the message says what to fix."""


#: the longest the one request asking the hub for a model's config.json may take (it answers
#: in well under a second; without an answer the model must come from the local cache)
HUB_PROBE_SECONDS = 5.0

#: the longest a chat template may take to render the two-message check chat (a real
#: template takes milliseconds; one that loops would stall every prompt)
TEMPLATE_SECONDS = 2.0


#: the most entries a tokenizer's vocabulary may hold (2**21 = 2,097,152). The largest real
#: vocabularies hold about 262k (Gemma); every id needs an embedding row and an output logit, so
#: a vocabulary of millions costs gigabytes per copy of the model and slows every token's softmax,
#: and is a damaged or hostile tokenizer, not a model to train
MAX_VOCABULARY = 2**21


class _TemplateTimeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: float):
    """Raise ``_TemplateTimeout`` inside the block once ``seconds`` have passed (a real-time
    timer; on the main thread only, where signals are delivered; elsewhere the block runs
    unbounded and is judged by its time once it ends)."""
    if threading.current_thread() is not threading.main_thread():
        began = time.perf_counter()
        yield
        if time.perf_counter() - began > seconds:
            raise _TemplateTimeout
        return

    def expire(signum, frame):
        raise _TemplateTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def load_policy(
    name_or_dir: str,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
    check_size: Callable[[ModelSize], None] | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``(model, tokenizer)`` for a causal-LM policy.

    Args:
        name_or_dir: a checkpoint directory holding ``config.json`` (and the
            tokenizer files), or a Hugging Face hub id (``owner/name``).
        device: torch device the model is moved to (``"cpu"``, ``"cuda"``,
            ``"cuda:1"``).
        dtype: parameter dtype (``torch.float32`` for the tiny model and CPU;
            ``torch.bfloat16`` for real checkpoints on GPU).
        check_size: called with the model's size (from its ``config.json``) before any
            weight is read; it raises to refuse the model (the memory check of a run).

    Returns:
        The model, in eval mode as ``from_pretrained`` leaves it (the trainer
        switches it to train mode), and its tokenizer.

    Resolution: an existing directory is loaded with ``local_files_only=True``
    and must contain ``config.json``. A string that does not exist and that can
    only be a path (absolute, ``./``, ``../``, ``~``, a trailing ``/``, or not of
    the ``owner/name`` form) raises ``FileNotFoundError`` without any network
    access. Anything else is taken as a hub id; a relative ``runs/tiny`` that
    does not exist is indistinguishable from a hub id, so pass an absolute path
    for local checkpoints.

    Padding: when the tokenizer defines no pad token, its EOS token is used as
    pad (and recorded as the model's ``pad_token_id`` if that is unset). Padded
    positions are always masked out of attention and loss, so reusing EOS is
    harmless, and batched generation and scoring need some pad id.
    """
    path = Path(name_or_dir).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"{str(path)!r} is a directory but has no config.json, so it is not a model "
                "checkpoint. Pass a directory written by save_pretrained (for the embedded "
                "model, one made by agentcredit.train.warm_start.tiny_model.bootstrap_tiny_model) "
                "or a "
                "Hugging Face hub id such as 'Qwen/Qwen2.5-1.5B-Instruct'."
            )
        problem = settings_problem(path)
        if not problem and check_size is not None:  # before the weights are read at all
            _check_size(str(path), True, name_or_dir, check_size)
        problem = problem or weights_problem(path)
        if problem:
            raise ModelLoadError(f"cannot load the model {name_or_dir!r}: {problem}")
        source, local_only = str(path), True
    elif path.exists():
        raise FileNotFoundError(
            f"{str(path)!r} is a file, not a model checkpoint directory. Pass the directory "
            "that holds config.json and the weights, or a Hugging Face hub id such as "
            "'Qwen/Qwen2.5-1.5B-Instruct'."
        )
    elif looks_local(name_or_dir):
        raise FileNotFoundError(
            f"model directory {name_or_dir!r} does not exist (resolved to {str(path)!r}). "
            "Pass an existing checkpoint directory containing config.json (for the embedded "
            "model, create one with "
            "agentcredit.train.warm_start.tiny_model.bootstrap_tiny_model) or a "
            "Hugging Face hub id such as 'Qwen/Qwen2.5-1.5B-Instruct'."
        )
    else:
        source, local_only = name_or_dir, hub_local_only(name_or_dir)
        # only its config.json is fetched for this; its sizes are checked even unasked, as a
        # local folder's are (weights_problem), before transformers builds anything of them
        _check_size(source, local_only, name_or_dir, check_size or (lambda size: None))

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only,
                                                  trust_remote_code=False)
        if len(tokenizer) > MAX_VOCABULARY:  # before the weights are read
            raise ModelLoadError(
                f"the tokenizer of {name_or_dir!r} holds {len(tokenizer):,} tokens, more than "
                f"the {MAX_VOCABULARY:,} any real vocabulary needs; copy the model's own "
                "tokenizer files (tokenizer.json, tokenizer_config.json) into the folder")
        model, info = AutoModelForCausalLM.from_pretrained(
            source, dtype=dtype, local_files_only=local_only, trust_remote_code=False,
            use_safetensors=True, output_loading_info=True)
    except ModelLoadError:  # a ValueError, said as it is
        raise
    except (OSError, ValueError, RuntimeError, KeyError, SafetensorError) as err:
        raise ModelLoadError(f"cannot load the model {name_or_dir!r}: {_first_line(err)}") from None
    problem = _loaded_problem(model, info)
    if problem:
        raise ModelLoadError(f"cannot load the model {name_or_dir!r}: {problem}")
    _check_token_ids(tokenizer, model, name_or_dir)
    _check_chat_template(tokenizer, name_or_dir)
    if not tokenizer("go to the kitchen", add_special_tokens=False)["input_ids"]:
        raise ModelLoadError(f"the tokenizer of {name_or_dir!r} turns text into no tokens: its "
                             f"vocabulary ({len(tokenizer)} tokens) lacks the files that hold it "
                             "(tokenizer.json, or vocab.json and merges.txt); copy the model's "
                             "tokenizer files into the folder")
    model.to(device)

    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ModelLoadError(
                f"the tokenizer of {name_or_dir!r} defines neither a pad nor an eos token; "
                "set tokenizer.pad_token in the checkpoint's tokenizer_config.json"
            )
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def _check_size(source: str, local_only: bool, name_or_dir: str,
                check_size: Callable[[ModelSize], None]) -> None:
    """``check_size`` on the size of the model ``config.json`` at ``source`` describes."""
    try:
        size = model_size(source, local_only)
    except ValueError as err:
        raise ModelLoadError(f"cannot load the model {name_or_dir!r}: {err}") from None
    check_size(size)


def hub_local_only(name: str) -> bool:
    """Whether the hub model ``name`` is read from the local cache only (True: the hub cannot be
    reached, or ``HF_HUB_OFFLINE`` is set, and the cache holds its ``config.json``) or from the
    hub (False), asked with one request of at most ``HUB_PROBE_SECONDS`` and no retries.

    Raises:
        ModelLoadError: the hub says there is no such model, or the model is not cached and
            the hub cannot be reached (``from_pretrained`` would retry for half a minute per
            file before failing).
    """
    cached = isinstance(try_to_load_from_cache(name, "config.json"), str)
    if is_offline_mode():
        if cached:
            return True
        raise ModelLoadError(f"the model {name!r} is neither a local folder nor in the hub cache "
                             f"({constants.HF_HUB_CACHE}), and HF_HUB_OFFLINE is set; pass the "
                             f"path of a model folder, or download it first (hf download {name}, "
                             "with HF_HUB_OFFLINE unset)")
    try:
        get_hf_file_metadata(hf_hub_url(name, "config.json"), timeout=HUB_PROBE_SECONDS)
    except (RepositoryNotFoundError, RevisionNotFoundError, RemoteEntryNotFoundError) as err:
        raise ModelLoadError(f"the model {name!r} is neither a local folder nor a model on the hub "
                             f"({_first_line(err)}); pass the path of a model folder or an "
                             "existing hub id (a gated or private model needs hf auth login)"
                             ) from None
    except HFValidationError as err:
        raise ModelLoadError(f"the model {name!r} is neither a local folder nor a hub id "
                             f"({_first_line(err)}); pass the path of a model folder") from None
    except (httpx.TransportError, OSError) as err:  # no network, a timeout, the hub failing
        if cached:
            return True
        raise ModelLoadError(f"the model {name!r} is neither a local folder nor in the hub cache "
                             f"({constants.HF_HUB_CACHE}), and the hub cannot be reached in "
                             f"{HUB_PROBE_SECONDS:g} s ({type(err).__name__}: {_first_line(err)}); "
                             "pass the path of a model folder, or download the model where the "
                             f"hub is reachable (hf download {name}) and set HF_HUB_OFFLINE=1 "
                             "(HF_HUB_CACHE names the cache)") from None
    return False


def _loaded_problem(model: PreTrainedModel, info: dict) -> str:
    """Why a loaded model is not the one its files describe (``info``: from_pretrained's
    loading info), or ``""``."""
    if info.get("missing_keys"):
        missing = sorted(info["missing_keys"])
        return (f"the weights lack {len(missing)} parameters of the model (first: {missing[0]}); "
                "loading would leave them random")
    if info.get("mismatched_keys"):
        return f"the weights have the wrong shape for {min(info['mismatched_keys'])}"
    for name, parameter in model.named_parameters():
        if not torch.isfinite(parameter).all():
            return f"the weights hold NaN or infinite values in {name}"
    return ""


def _check_token_ids(tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel,
                     name_or_dir: str) -> None:
    """Refuse a tokenizer with an id past the rows of the model's input embedding (an added
    token's id counts even where ``len(tokenizer)`` does not reach it)."""
    rows = model.get_input_embeddings().num_embeddings
    ids = max(len(tokenizer), max(tokenizer.get_vocab().values(), default=-1) + 1)
    if ids > rows:
        raise ModelLoadError(
            f"the tokenizer of {name_or_dir!r} has token ids up to {ids - 1:,} but the model's "
            f"embedding has {rows:,} rows (ids 0 to {rows - 1:,}); use the tokenizer saved with "
            "these weights, or resize the embedding to the tokenizer "
            "(model.resize_token_embeddings(len(tokenizer))) and save both")


def _check_chat_template(tokenizer: PreTrainedTokenizerBase, name_or_dir: str) -> None:
    """Render a two-message chat in the template's sandbox; any failure is one line."""
    if tokenizer.chat_template is None:
        raise ModelLoadError(f"the tokenizer of {name_or_dir!r} has no chat template, which the "
                             "prompts are built with; use an instruction-tuned checkpoint or "
                             "set chat_template in its tokenizer_config.json")
    chat = [{"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "go to the kitchen"}]
    try:
        with _time_limit(TEMPLATE_SECONDS):
            tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    except _TemplateTimeout:
        raise ModelLoadError(f"the chat template of {name_or_dir!r} took more than "
                             f"{TEMPLATE_SECONDS:g} s to render a two-message chat (every prompt "
                             "is rendered with it); fix chat_template in its "
                             "tokenizer_config.json (or chat_template.jinja)") from None
    except Exception as err:  # noqa: BLE001 (a template raises whatever Jinja or a filter raises)
        raise ModelLoadError(f"the chat template of {name_or_dir!r} fails in Jinja's sandbox "
                             f"({type(err).__name__}: {_first_line(err)}); fix chat_template in "
                             "its tokenizer_config.json (or chat_template.jinja)") from None


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__
