"""Where a task's passages and search come from: plain specs in the task payload, opened
once per process.

A corpus spec is ``{"kind": "generated", "num_passages": N, "seed": S}`` (``world.py``)
or ``{"kind": "flashrag", "path": FILE}`` (``flashrag.load_corpus``); a retrieval spec
is ``{"kind": "bm25"}`` (a local index of the corpus) or
``{"kind": "server", "url": URL, "timeout_s": T, "retries": R}`` (``server.py``). Tasks
carry specs, not objects, so they stay plain JSON; the worlds, corpora and indices
behind them are cached here, so every environment instance shares them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from agentcredit.envs.searchqa.corpus import Passage
from agentcredit.envs.searchqa.flashrag import load_corpus
from agentcredit.envs.searchqa.retrieval import BM25Retriever, Retriever
from agentcredit.envs.searchqa.server import ServerRetriever
from agentcredit.envs.searchqa.world import World, generate_world


@lru_cache(maxsize=4)
def generated_world(num_passages: int, seed: int) -> World:
    """The generated world of a ``generated`` corpus spec."""
    return generate_world(num_passages, seed)


@lru_cache(maxsize=4)
def _passages(spec_key: str) -> tuple[Passage, ...]:
    spec = json.loads(spec_key)
    if spec.get("kind") == "generated":
        return tuple(generated_world(spec["num_passages"], spec["seed"]).passages)
    if spec.get("kind") == "flashrag":
        return tuple(load_corpus(spec["path"]))
    raise ValueError(f"unknown corpus spec {spec!r}; expected kind 'generated' or 'flashrag'")


@lru_cache(maxsize=4)
def _bm25(spec_key: str) -> BM25Retriever:
    return BM25Retriever(_passages(spec_key))


def bm25_index(corpus: dict[str, Any]) -> BM25Retriever:
    """The local BM25 index of a corpus spec (built once per process)."""
    return _bm25(json.dumps(corpus, sort_keys=True))


def open_retriever(corpus: dict[str, Any], retrieval: dict[str, Any]) -> Retriever:
    """The retriever a task's specs name."""
    if retrieval.get("kind") == "bm25":
        return bm25_index(corpus)
    if retrieval.get("kind") == "server":
        return ServerRetriever(retrieval["url"], timeout_s=retrieval["timeout_s"],
                               retries=retrieval["retries"])
    raise ValueError(f"unknown retrieval spec {retrieval!r}; expected kind 'bm25' or 'server'")
