"""WebShop's purchase reward (``get_reward`` of the original ``web_agent_site``), restated.

For a purchased product ``p`` and a goal ``g`` (requested attributes ``A``,
requested option values ``O``, price bound ``u``, the target product's title,
query and category path):

```
n_attr  = #{a ∈ A : some attribute of p fuzzy-matches a (score > 85),
                    or a is a substring of p's title, bullet points or description}
n_opt   = #{o ∈ O : some selected option value fuzzy-matches o (score > 85),
                    both sides colour-normalised first}
price   = 1[price(p) <= u]
reward  = (n_attr + n_opt + price) / (|A| + |O| + 1) · r_type
```

``r_type`` grades the product type from the nouns of the two titles:
``title_score = |nouns(p.title) ∩ nouns(g.title)| / len(nouns(g.title))``
(0.2 when the goal title has no noun), ``match = query(p) == query(g) or the
category paths share >= 2 segments or title_score > 0.2``; then ``r_type`` is
``0`` if ``title_score == 0``, else ``0.1`` if ``title_score < 0.1``, else
``1`` if ``match`` else ``0.5``. Success is ``reward == 1``.

Where this differs from the original, and why:

- **Nouns without spaCy.** The original keeps the tokens spaCy tags NOUN or
  PROPN. spaCy's English model cannot be downloaded here, so a title token
  (lower case, split at every non-letter, one-letter tokens dropped) counts
  as a noun unless it is a function word or in our closed list of adjectives,
  colours and participles (``NON_NOUNS``). The list covers the non-noun words
  our generator writes into titles; on official titles it approximates the
  tagger (a brand counts as a noun, as spaCy's PROPN does).
- **Fuzzy matching.** The original calls ``thefuzz``'s ``token_set_ratio``,
  which lower-cases, replaces non-alphanumerics by spaces (and drops
  non-ASCII characters) and returns a rounded integer. We call rapidfuzz's
  ``token_set_ratio`` with its ``default_process`` and round the same way;
  only strings with non-ASCII characters can score differently.
- **Colour list.** ``normalize_color`` has the original's rule (the first
  listed colour contained in the value replaces it) over our own list.
- **Options as a mapping.** Where a goal's options are a name -> value mapping
  (the human-instruction goals), we match the values; the original passes the
  mapping's (name, value) pairs.
- **No price bound.** A goal whose bound is unknown gets bound 1,000,000 (as the
  original's goal builder does), so the price term is always defined.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

FUZZY_THRESHOLD = 85
NO_PRICE_BOUND = 1_000_000.0

#: colours in the order ``normalize_color`` tries them (multi-word ones first).
COLORS: tuple[str, ...] = (
    "rose gold", "navy blue", "sky blue", "light blue", "dark blue", "hot pink", "off white",
    "black", "white", "grey", "gray", "silver", "gold", "navy", "blue", "red", "green",
    "yellow", "orange", "purple", "pink", "brown", "beige", "khaki", "tan", "cream",
    "ivory", "burgundy", "maroon", "teal", "turquoise", "coral", "mauve", "plum", "berry",
    "nude", "espresso", "walnut", "oak", "cognac", "natural", "blonde", "auburn",
)

_FUNCTION_WORDS = frozenset([
    "a", "an", "the", "and", "or", "nor", "but", "for", "with", "without", "of", "in", "on", "to",
    "by", "from", "at", "as", "per", "into", "onto", "over", "under", "up", "down", "out", "off",
    "than", "then", "so", "if", "not", "no", "yes", "is", "are", "be", "been", "being", "was",
    "were", "it", "its", "this", "that", "these", "those", "your", "you", "our", "we", "my", "his",
    "her", "their", "them", "they", "he", "she", "me", "us", "all", "any", "each", "every", "some",
    "most", "more", "less", "very", "too", "also", "only", "just", "about", "after", "before",
    "between", "during", "through", "via", "vs"
])

#: words our titles use that are not nouns: adjectives, colours, participles, adverbs.
NON_NOUNS = frozenset([
    "new", "long", "short", "natural", "organic", "free", "easy", "high", "low", "soft", "hard",
    "light", "dark", "heavy", "large", "small", "medium", "big", "mini", "extra", "super", "ultra",
    "premium", "professional", "classic", "modern", "vintage", "portable", "adjustable",
    "waterproof", "lightweight", "slim", "regular", "loose", "thick", "thin", "wide", "deep",
    "fast", "quick", "smart", "wireless", "clear", "fine", "dry", "sensitive", "gentle", "genuine",
    "solid", "pure", "fresh", "sweet", "salty", "spicy", "unsweetened", "toasted", "roasted",
    "healthy", "safe", "non", "anti", "multi", "full", "half", "single", "double", "triple",
    "daily", "everyday", "casual", "formal", "comfortable", "breathable", "durable", "stylish",
    "cute", "best", "great", "good", "perfect", "ideal", "compatible", "rechargeable", "dimmable",
    "programmable", "packable", "stackable", "hooded", "cushioned", "braided", "plated", "pressed",
    "cold", "hot", "warm", "cool", "open", "built", "auto", "lasting", "looking", "cancelling",
    "charging", "wrapped", "added", "cooked", "treated", "pigmented", "tested", "based",
    "resistant", "proof", "friendly", "greasy", "toxic", "shaped", "woven", "upholstered",
    "needed", "curved", "embroidered", "caring", "tufted", "reclining", "removable", "italian",
    "virgin", "original", "tropical", "peppered", "scented", "unscented", "floral", "bohemian",
    "industrial", "rustic", "stereo", "compact", "shockproof", "durable", "matte", "glossy",
    "dimensional", "black", "white", "red", "blue", "green", "yellow", "orange", "purple", "pink",
    "brown", "grey", "gray", "silver", "gold", "navy", "beige", "khaki", "tan", "cream", "ivory",
    "burgundy", "maroon", "teal", "turquoise", "coral", "mauve", "plum", "nude", "espresso",
    "walnut", "oak", "cognac", "blonde", "auburn", "upf"
]) | _FUNCTION_WORDS

_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Purchase:
    """The facts of a bought (or inspected) product that the reward reads.

    Attributes:
        title: WebShop ``name`` / ``Title``.
        query: the search term the product was collected under.
        product_category: the `` › ``-separated category path.
        attributes: WebShop ``Attributes`` (hidden from the pages).
        bullet_points: WebShop ``BulletPoints`` (the Features page).
        description: WebShop ``Description``.
        price: the price paid.
        selected: the option values chosen before ``buy now``.
    """

    title: str
    query: str
    product_category: str
    attributes: tuple[str, ...]
    bullet_points: tuple[str, ...]
    description: str
    price: float
    selected: tuple[str, ...]


@dataclass(frozen=True)
class GoalSpec:
    """What a goal asks for (the reward's view of ``goals.Goal``)."""

    title: str
    query: str
    product_category: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    price_upper: float


@dataclass(frozen=True)
class TypeMatch:
    """The product-type part of the reward."""

    r_type: float
    title_score: float
    query_match: bool
    category_match: bool

    @property
    def matched(self) -> bool:
        """The original's ``match``: it lifts ``r_type`` from 0.5 to 1."""
        return self.query_match or self.category_match or self.title_score > 0.2


@dataclass(frozen=True)
class RewardBreakdown:
    """Every term of the reward, and the reward."""

    type_match: TypeMatch
    attributes: tuple[bool, ...]
    options: tuple[bool, ...]
    price_ok: bool
    total: float


def normalize_color(value: str) -> str:
    """The first colour of ``COLORS`` contained in ``value``, else ``value`` unchanged."""
    for color in COLORS:
        if color in value:
            return color
    return value


def fuzzy_score(a: str, b: str) -> int:
    """``token_set_ratio`` on processed strings, rounded to an integer as thefuzz does."""
    return round(fuzz.token_set_ratio(a, b, processor=default_process))


def title_nouns(title: str) -> list[str]:
    """The title's nouns, in order and with repeats (see the module notes)."""
    return [w for w in _WORD.findall(title.lower()) if len(w) > 1 and w not in NON_NOUNS]


def type_match(purchased: Purchase, goal: GoalSpec) -> TypeMatch:
    """``r_type`` and its ingredients (original ``get_type_reward``)."""
    query_match = purchased.query == goal.query
    ours = {s.strip() for s in purchased.product_category.split("›")}
    theirs = {s.strip() for s in goal.product_category.split("›")}
    category_match = len(ours & theirs) >= 2
    desired = title_nouns(goal.title)
    if desired:
        title_score = len(set(title_nouns(purchased.title)) & set(desired)) / len(desired)
    else:
        title_score = 0.2
    ingredients = TypeMatch(1.0, title_score, query_match, category_match)
    r_type = 1.0 if ingredients.matched else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return replace(ingredients, r_type=r_type)


def attribute_matched(attribute: str, purchased: Purchase) -> bool:
    """One requested attribute: fuzzy against the attribute list, else a substring of the text."""
    if any(fuzzy_score(a, attribute) > FUZZY_THRESHOLD for a in purchased.attributes):
        return True
    return (attribute in purchased.title.lower()
            or attribute in " ".join(purchased.bullet_points).lower()
            or attribute in purchased.description.lower())


def option_matched(option: str, selected: Sequence[str]) -> bool:
    """One requested option value against the selected values, colour-normalised."""
    wanted = normalize_color(option)
    return any(fuzzy_score(normalize_color(s), wanted) > FUZZY_THRESHOLD for s in selected)


def price_ok(price: float, price_upper: float) -> bool:
    return price <= price_upper


def combine(r_type: float, matched: int, requested: int) -> float:
    """``matched / requested · r_type``: the one place the terms become the reward."""
    return matched / requested * r_type


def reward(purchased: Purchase, goal: GoalSpec) -> RewardBreakdown:
    """The reward of buying ``purchased`` for ``goal``."""
    types = type_match(purchased, goal)
    attrs = tuple(attribute_matched(a, purchased) for a in goal.attributes)
    opts = tuple(option_matched(o, purchased.selected) for o in goal.options)
    price = price_ok(purchased.price, goal.price_upper)
    total = combine(types.r_type, sum(attrs) + sum(opts) + int(price),
                    len(goal.attributes) + len(goal.options) + 1)
    return RewardBreakdown(types, attrs, opts, price, total)
