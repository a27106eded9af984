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
(``check_size``; ``train/build.py``). The chat template is rendered in Jinja's sandbox, as
every prompt will be, on two chats (``template_check_chats``): two short messages, and a
prompt as long as an agent's long history, since a template can be written to fail or loop
only on long prompts. Each renders in a forked child process (``_render_apart``) held to
``TEMPLATE_SECONDS`` and to ``TEMPLATE_MEMORY`` more memory than the process holds, and must
come out at most ``TEMPLATE_GROWTH`` times its messages plus ``TEMPLATE_SLACK`` characters.
A child, not a signal in this process, because a template's work can sit in one C call that
no signal interrupts and no exception bounds (``'x' * 3000000000`` allocates 3 GB at once):
the child's address space is capped (``RLIMIT_AS``, so that allocation fails there) and it is
killed at its deadline, and this process's memory never grows. A template that fails, loops,
grows without bound or renders too long is refused in one line before the weights load. So is
a tokenizer of more than ``MAX_VOCABULARY`` entries, one with an id the model's input
embedding has no row for, and one with neither a pad nor an EOS token.
"""

from __future__ import annotations

import os
import resource
import select
import signal
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

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
from agentcredit.error_text import first_line
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

#: the longest a chat template may take to render each check chat (a real template takes
#: milliseconds; one that loops would stall every prompt)
TEMPLATE_SECONDS = 2.0

#: the memory a chat template may take to render a check chat, beyond what the process holds
#: (a real one needs a few MB for a long prompt)
TEMPLATE_MEMORY = 512 << 20

#: a check chat may render to at most TEMPLATE_GROWTH times the characters of its messages
#: plus TEMPLATE_SLACK (a template adds role headers and at most a default system prompt)
TEMPLATE_GROWTH = 4
TEMPLATE_SLACK = 1 << 16

#: the steps of history in the long check prompt (about 26,000 characters: the prompt of a long
#: agent episode with its whole history)
LONG_PROMPT_STEPS = 200


#: the most entries a tokenizer's vocabulary may hold (2**21 = 2,097,152). The largest real
#: vocabularies hold about 262k (Gemma); every id needs an embedding row and an output logit, so
#: a vocabulary of millions costs gigabytes per copy of the model and slows every token's softmax,
#: and is a damaged or hostile tokenizer, not a model to train
MAX_VOCABULARY = 2**21


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

    Resolution (``_resolve``): an existing directory is loaded with ``local_files_only=True``
    and must contain ``config.json``. A string that does not exist and that can
    only be a path (absolute, ``./``, ``../``, ``~``, a trailing ``/``, or not of
    the ``owner/name`` form) raises ``FileNotFoundError`` without any network
    access. Anything else is taken as a hub id; a relative ``runs/tiny`` that
    does not exist is indistinguishable from a hub id, so pass an absolute path
    for local checkpoints.

    Padding (``_pad_with_eos``): when the tokenizer defines no pad token, its EOS token is
    used as pad (and recorded as the model's ``pad_token_id`` if that is unset). Padded
    positions are always masked out of attention and loss, so reusing EOS is
    harmless, and batched generation and scoring need some pad id.
    """
    source, local_only = _resolve(name_or_dir, check_size)
    tokenizer, model = _load_checked(source, local_only, name_or_dir, dtype)
    model.to(device)
    _pad_with_eos(tokenizer, model, name_or_dir)
    return model, tokenizer


def _resolve(name_or_dir: str,
             check_size: Callable[[ModelSize], None] | None) -> tuple[str, bool]:
    """``(source, local_only)`` for ``from_pretrained``: a local folder checked whole
    (``settings_problem``, ``check_size``, then ``weights_problem``), or a hub id the hub was
    asked about (``hub_local_only``) and sized; a path that is no model folder is refused."""
    path = Path(name_or_dir).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"{str(path)!r} is a directory but has no config.json, so it is not a model "
                "checkpoint. Pass a directory written by save_pretrained (for the embedded "
                "model, one made by "
                "agentcredit.train.warm_start.model_bootstrap.bootstrap_tiny_model) or a "
                "Hugging Face hub id such as 'Qwen/Qwen2.5-1.5B-Instruct'."
            )
        problem = settings_problem(path)
        if not problem and check_size is not None:  # before the weights are read at all
            _check_size(str(path), True, name_or_dir, check_size)
        problem = problem or weights_problem(path)
        if problem:
            raise ModelLoadError(f"cannot load the model {name_or_dir!r}: {problem}")
        return str(path), True
    if path.exists():
        raise FileNotFoundError(
            f"{str(path)!r} is a file, not a model checkpoint directory. Pass the directory "
            "that holds config.json and the weights, or a Hugging Face hub id such as "
            "'Qwen/Qwen2.5-1.5B-Instruct'."
        )
    if looks_local(name_or_dir):
        raise FileNotFoundError(
            f"model directory {name_or_dir!r} does not exist (resolved to {str(path)!r}). "
            "Pass an existing checkpoint directory containing config.json (for the embedded "
            "model, create one with "
            "agentcredit.train.warm_start.model_bootstrap.bootstrap_tiny_model) or a "
            "Hugging Face hub id such as 'Qwen/Qwen2.5-1.5B-Instruct'."
        )
    source, local_only = name_or_dir, hub_local_only(name_or_dir)
    # only its config.json is fetched for this; its sizes are checked even unasked, as a
    # local folder's are (weights_problem), before transformers builds anything of them
    _check_size(source, local_only, name_or_dir, check_size or (lambda size: None))
    return source, local_only


def _load_checked(source: str, local_only: bool, name_or_dir: str,
                  dtype: torch.dtype) -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """The tokenizer, then the model, of ``source``, each refused in one line
    (``ModelLoadError``) where the module docstring says: the tokenizer's size and chat
    template before any weight is read, the weights as loaded, the tokenizer against the
    model's embedding."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only,
                                                  trust_remote_code=False)
        if len(tokenizer) > MAX_VOCABULARY:  # before the weights are read
            raise ModelLoadError(
                f"the tokenizer of {name_or_dir!r} holds {len(tokenizer):,} tokens, more than "
                f"the {MAX_VOCABULARY:,} any real vocabulary needs; copy the model's own "
                "tokenizer files (tokenizer.json, tokenizer_config.json) into the folder")
        _check_chat_template(tokenizer, name_or_dir)  # before the weights are read
        model, info = AutoModelForCausalLM.from_pretrained(
            source, dtype=dtype, local_files_only=local_only, trust_remote_code=False,
            use_safetensors=True, output_loading_info=True)
    except ModelLoadError:  # a ValueError, said as it is
        raise
    except (OSError, ValueError, RuntimeError, KeyError, SafetensorError) as err:
        raise ModelLoadError(f"cannot load the model {name_or_dir!r}: {first_line(err)}") from None
    problem = _loaded_problem(model, info)
    if problem:
        raise ModelLoadError(f"cannot load the model {name_or_dir!r}: {problem}")
    _check_token_ids(tokenizer, model, name_or_dir)
    if not tokenizer("go to the kitchen", add_special_tokens=False)["input_ids"]:
        raise ModelLoadError(f"the tokenizer of {name_or_dir!r} turns text into no tokens: its "
                             f"vocabulary ({len(tokenizer)} tokens) lacks the files that hold it "
                             "(tokenizer.json, or vocab.json and merges.txt); copy the model's "
                             "tokenizer files into the folder")
    return tokenizer, model


def _pad_with_eos(tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel,
                  name_or_dir: str) -> None:
    """Give a tokenizer without a pad token its EOS token as pad, and the model's config that
    pad id where it has none (``load_policy``'s docstring says why)."""
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ModelLoadError(
                f"the tokenizer of {name_or_dir!r} defines neither a pad nor an eos token; "
                "set tokenizer.pad_token in the checkpoint's tokenizer_config.json"
            )
        tokenizer.pad_token = tokenizer.eos_token
    if getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = tokenizer.pad_token_id


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
                             f"({first_line(err)}); pass the path of a model folder or an "
                             "existing hub id (a gated or private model needs hf auth login)"
                             ) from None
    except HFValidationError as err:
        raise ModelLoadError(f"the model {name!r} is neither a local folder nor a hub id "
                             f"({first_line(err)}); pass the path of a model folder") from None
    except (httpx.TransportError, OSError) as err:  # no network, a timeout, the hub failing
        if cached:
            return True
        raise ModelLoadError(f"the model {name!r} is neither a local folder nor in the hub cache "
                             f"({constants.HF_HUB_CACHE}), and the hub cannot be reached in "
                             f"{HUB_PROBE_SECONDS:g} s ({type(err).__name__}: {first_line(err)}); "
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


def template_check_chats() -> list[tuple[str, list[dict[str, str]]]]:
    """``(what, messages)`` of each chat a chat template must render at load, in order: two
    short messages, then a prompt of the shape every policy prompt has (a system and a user
    message, ``rollout/prompts.build_messages``) holding ``LONG_PROMPT_STEPS`` steps of an
    agent's history."""
    system = {"role": "system", "content": "You are an agent in a text world."}
    steps = "\n".join(f"Observation: You arrive at cabinet {k}. On the cabinet {k}, you see a "
                      f"mug {k} and a plate {k}.\nAction: take mug {k} from cabinet {k}"
                      for k in range(1, LONG_PROMPT_STEPS + 1))
    user = (f"Your task is to: put a clean mug in the coffee machine.\nRecent steps:\n{steps}\n"
            "Current observation: You arrive at the sink.\nAdmissible actions:\n"
            "clean mug 1 with sink 1\ngo to cabinet 1\ninventory")
    long = (f"a {LONG_PROMPT_STEPS}-step agent prompt of {len(system['content']) + len(user):,} "
            "characters")
    return [("a two-message chat", [system, {"role": "user", "content": "go to the kitchen"}]),
            (long, [system, {"role": "user", "content": user}])]


def _check_chat_template(tokenizer: PreTrainedTokenizerBase, name_or_dir: str) -> None:
    """Render ``template_check_chats`` within the bounds the module docstring gives; any
    failure is one line."""
    if tokenizer.chat_template is None:
        raise ModelLoadError(f"the tokenizer of {name_or_dir!r} has no chat template, which the "
                             "prompts are built with; use an instruction-tuned checkpoint or "
                             "set chat_template in its tokenizer_config.json")
    chats = template_check_chats()
    outcomes = _render_apart(tokenizer, [messages for _, messages in chats])
    for (what, messages), (kind, detail) in zip(chats, outcomes, strict=False):
        problem = _render_problem(what, messages, kind, detail)
        if problem:
            raise ModelLoadError(f"the chat template of {name_or_dir!r} {problem}; fix "
                                 "chat_template in its tokenizer_config.json (or "
                                 "chat_template.jinja)")


def _render_problem(what: str, messages: list[dict[str, str]], kind: str, detail: str) -> str:
    """Why the render of the check chat ``messages`` (``what``), as ``_render_apart`` answered
    ``(kind, detail)``, refuses the template, as a clause; or ``""``."""
    if kind == "ok":
        text = sum(len(message["content"]) for message in messages)
        bound = TEMPLATE_GROWTH * text + TEMPLATE_SLACK
        if int(detail) <= bound:
            return ""
        return (f"renders {what} as {int(detail):,} characters, more than the {bound:,} a prompt "
                f"may grow to ({TEMPLATE_GROWTH} times the {text:,} characters of its messages "
                f"plus {TEMPLATE_SLACK:,})")
    return {"time": f"took more than {TEMPLATE_SECONDS:g} s to render {what} (every prompt is "
                    "rendered with it)",
            "memory": f"needed more than {TEMPLATE_MEMORY >> 20} MiB to render {what} "
                      "(MemoryError)",
            "error": f"fails in Jinja's sandbox on {what} ({detail})",
            "died": f"ended the process rendering {what} ({detail})"}[kind]


def _render_apart(tokenizer: PreTrainedTokenizerBase,
                  chats: list[list[dict[str, str]]]) -> list[tuple[str, str]]:
    """Render ``chats`` in turn (``apply_chat_template``, with the generation prompt) in a
    forked child process; ``(kind, detail)`` for each chat up to the first that fails:
    ``("ok", rendered length)``, ``("error", "Type: first line")``, ``("memory", "")`` (more
    than ``TEMPLATE_MEMORY``), ``("time", "")`` (no answer in ``TEMPLATE_SECONDS``; the child
    is killed) or ``("died", how)``."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # python >= 3.12 warns when a threaded process forks: the
        warnings.simplefilter("ignore", DeprecationWarning)  # child only renders, then exits
        pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _render_in_child(tokenizer, chats, write_end)
    os.close(write_end)
    outcomes: list[tuple[str, str]] = []
    pending, reaped = b"", False
    try:
        while len(outcomes) < len(chats):
            deadline = time.monotonic() + TEMPLATE_SECONDS
            while b"\n" not in pending:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([read_end], [], [], left)[0]:
                    return [*outcomes, ("time", "")]
                chunk = os.read(read_end, 1 << 16)
                if not chunk:  # it ended without a word: a crash, or the system killed it
                    _, status = os.waitpid(pid, 0)
                    reaped = True
                    code = os.waitstatus_to_exitcode(status)
                    how = f"signal {-code}" if code < 0 else f"exit status {code}"
                    return [*outcomes, ("died", how)]
                pending += chunk
            line, _, pending = pending.partition(b"\n")
            kind, _, detail = line.decode(errors="replace").partition(" ")
            outcomes.append((kind, detail))
            if kind != "ok":
                break
        return outcomes
    finally:
        os.close(read_end)
        if not reaped:
            os.kill(pid, signal.SIGKILL)  # done or not, it has nothing more to do
            os.waitpid(pid, 0)


def _render_in_child(tokenizer: PreTrainedTokenizerBase, chats: list[list[dict[str, str]]],
                     answer: int) -> NoReturn:
    """The child's part of ``_render_apart``: cap the memory, render each chat, write one line
    per chat to the descriptor ``answer``, and exit without returning to the parent's code."""
    try:
        _cap_memory(TEMPLATE_MEMORY)
        for chat in chats:
            try:
                text = tokenizer.apply_chat_template(chat, tokenize=False,
                                                     add_generation_prompt=True)
                line = f"ok {len(text)}"
            except MemoryError:
                line = "memory "
            except Exception as err:  # noqa: BLE001 (a template raises whatever Jinja or a filter raises)
                line = f"error {type(err).__name__}: {first_line(err)}"
            os.write(answer, (line[:2000].replace("\n", " ") + "\n").encode(errors="replace"))
            if not line.startswith("ok"):
                break
    finally:
        os._exit(0)


def _cap_memory(extra: int) -> None:
    """Let this process map at most ``extra`` bytes more than it does now (``RLIMIT_AS``;
    where ``/proc`` does not say how much that is, only the time bound holds)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = min(x for x in (mapped + extra, soft, hard) if x != resource.RLIM_INFINITY)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
