"""Answer scoring: Search-R1's exact match and the SQuAD/HotpotQA token F1.

Normalisation (Search-R1's ``normalize_answer``, itself SQuAD's): lower-case,
drop every ASCII punctuation character, replace the articles ``a``, ``an``,
``the`` (whole words) by a space, collapse white space. Exact match is 1 when
the normalised prediction equals the normalised form of any golden answer.

Token F1 is computed on the normalised tokens against each golden answer and
the best is kept; as in HotpotQA's evaluator, a prediction or golden answer of
``yes``, ``no`` or ``noanswer`` scores 0 unless the two are equal. F1 is a
metric only: the reward is exact match (docs/backbones.md §2: Search ``1[EM]``).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_SPECIAL = frozenset({"yes", "no", "noanswer"})


def normalize_answer(text: str) -> str:
    """The comparison form of ``text``: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str | None, golden_answers: Sequence[str]) -> float:
    """1.0 when the normalised ``prediction`` equals a normalised golden answer, else 0.0;
    ``None`` (no answer given) scores 0."""
    if prediction is None:
        return 0.0
    predicted = normalize_answer(prediction)
    return float(any(predicted == normalize_answer(g) for g in golden_answers))


def _f1(predicted: str, golden: str) -> float:
    if (predicted in _SPECIAL or golden in _SPECIAL) and predicted != golden:
        return 0.0
    common = Counter(predicted.split()) & Counter(golden.split())
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted.split()), same / len(golden.split())
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str | None, golden_answers: Sequence[str]) -> float:
    """The best token F1 of the normalised ``prediction`` over the golden answers (0 for
    ``None``)."""
    if prediction is None:
        return 0.0
    predicted = normalize_answer(prediction)
    return max((_f1(predicted, normalize_answer(g)) for g in golden_answers), default=0.0)
