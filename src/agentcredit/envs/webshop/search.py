"""BM25 search over the catalog (WebShop's search engine, with ``bm25s`` in place of Pyserini).

A product's document is its title, attributes and bullet points. Documents and
queries go through the same tokenizer: lower case, alphanumeric runs, English
function words dropped, and a light plural folding (``shirts`` -> ``shirt``,
not ``dress``) in place of a stemmer. A search returns up to 50 products (as
WebShop does) with a positive score, best first, ties broken by catalog order.
"""

from __future__ import annotations

import re

import bm25s

from agentcredit.envs.ranking import top_k_positive
from agentcredit.envs.webshop.catalog import Catalog, Product

RESULTS_PER_SEARCH = 50

_TOKEN = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset([
    "a", "an", "the", "and", "or", "for", "with", "of", "in", "on", "to", "by", "from", "at", "as",
    "is", "are", "be", "it", "its", "this", "that", "these", "those", "i", "me", "my", "we", "our",
    "you", "your", "he", "she", "they", "them", "his", "her", "their", "what", "which", "who",
    "whom", "am", "was", "were", "been", "being", "have", "has", "had", "do", "does", "did", "but",
    "if", "than", "then", "so", "not", "no", "nor", "too", "very", "can", "will", "just"
])


def _fold(token: str) -> str:
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def search_tokens(text: str) -> list[str]:
    """The index terms of ``text``."""
    return [_fold(t) for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def document_text(product: Product) -> str:
    """What a product is indexed by: title, attributes and bullet points."""
    return " ".join((product.title, *product.attributes, *product.bullet_points))


class SearchIndex:
    """A BM25 index of a catalog (Lucene's BM25 variant, k1 = 1.5, b = 0.75)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        vocab: dict[str, int] = {}
        ids = [[vocab.setdefault(t, len(vocab)) for t in search_tokens(document_text(p))]
               for p in catalog.products]
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)

    def search(self, query: str, k: int = RESULTS_PER_SEARCH) -> tuple[int, ...]:
        """Indices of the ``k`` best-scoring products for ``query`` (score > 0)."""
        terms = search_tokens(query)
        if not terms:
            return ()
        return tuple(top_k_positive(self._bm25.get_scores(terms), k))
