"""Train a small tokenizer on environment text, for the embedded tiny model (docs/design.md,
"train/").

The laptop pipeline needs a tokenizer without downloading one, so we fit one on
the texts the agent will actually read and write: observations, actions and
instructions.

**Why byte-level BPE.** A word-level model would give the shortest sequences,
but every word it never saw (a new object name, a typo the policy samples, an
upper-case letter) becomes ``<unk>``, so ``decode(encode(x)) != x`` and the
rollout collector could not recover the action the policy wrote. Byte-level BPE
has no unknown symbol: its base alphabet is the 256 bytes, and its decoder maps
bytes back exactly, so every string round-trips byte for byte, newlines,
capitals and punctuation included (no whitespace normalisation at all). Trained
with a vocabulary budget well above what an environment corpus needs, the BPE
merges go all the way up to whole words: ``"go to countertop 1"`` encodes as
``go | ␣to | ␣countertop | ␣1``, as short as a word-level model on any word seen
at least ``min_frequency`` times, and degrades to sub-words and bytes instead of
``<unk>`` on anything else.

Pre-tokenisation is the GPT-2 regex (letters, digit runs, punctuation runs and
whitespace are separate chunks, a single leading space attached), which is
also what Qwen's tokenizer does, so our chat strings split the same way a real
checkpoint splits them.

Special tokens follow Qwen2.5-Instruct: ``<|endoftext|>`` (pad, also the BOS id
the model config records), ``<|im_start|>`` and ``<|im_end|>`` (EOS, ends every
chat turn). They get ids 0, 1 and 2 and are never split or merged.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD_TOKEN = "<|endoftext|>"
IM_START_TOKEN = "<|im_start|>"
IM_END_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START_TOKEN, IM_END_TOKEN)

# Qwen-style ChatML: every turn is `<|im_start|>{role}\n{content}<|im_end|>\n`;
# the generation prompt opens an assistant turn for the model to complete.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') + '<|im_end|>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|im_start|>assistant\n' }}"
    "{%- endif -%}"
)

# The role headers the chat template writes; added to the corpus so each is one token.
_CHAT_ROLES = ("system", "user", "assistant")


def _corpus_with_chat_roles(texts: Iterable[str], min_frequency: int) -> Iterator[str]:
    """Yield the environment texts, then each chat role header often enough to be merged."""
    yield from texts
    for role in _CHAT_ROLES:
        for _ in range(max(min_frequency, 1)):
            yield f"{IM_START_TOKEN}{role}\n"


def train_bpe_tokenizer(
    texts: Iterable[str],
    *,
    vocab_size: int = 4096,
    min_frequency: int = 2,
    model_max_length: int = 2048,
) -> PreTrainedTokenizerFast:
    """Fit a byte-level BPE tokenizer on ``texts`` and wrap it for ``transformers``.

    Args:
        texts: environment strings (observations, actions, instructions); any
            iterable, consumed once.
        vocab_size: upper bound on the vocabulary, special tokens and the 256
            byte symbols included. Training stops earlier when no pair occurs
            ``min_frequency`` times, so a small corpus gives a smaller vocabulary.
        min_frequency: a pair of symbols must occur this many times to be merged.
        model_max_length: the longest sequence the model accepts (its
            ``max_position_embeddings``); recorded on the tokenizer.

    Returns:
        A ``PreTrainedTokenizerFast`` with pad ``<|endoftext|>``, eos
        ``<|im_end|>``, no BOS prepended, and the Qwen-style chat template, so
        ``apply_chat_template`` works for system/user/assistant messages. The
        result is a deterministic function of the corpus and arguments.
    """
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(
            f"vocab_size={vocab_size} is too small: byte-level BPE needs at least "
            f"{256 + len(SPECIAL_TOKENS)} (256 bytes + {len(SPECIAL_TOKENS)} special tokens)"
        )
    if min_frequency < 1:
        raise ValueError(f"min_frequency={min_frequency} must be >= 1")

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    # trim_offsets=False keeps character offsets covering the leading space of a word.
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_corpus_with_chat_roles(texts, min_frequency), trainer=trainer)

    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD_TOKEN,
        eos_token=IM_END_TOKEN,
        extra_special_tokens=[IM_START_TOKEN],
        chat_template=CHAT_TEMPLATE,
        model_max_length=model_max_length,
        # Byte-level decoding is already exact; the legacy clean-up would delete
        # the space in "cabinet 1 , a" style text and break round-trips.
        clean_up_tokenization_spaces=False,
    )
