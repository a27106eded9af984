"""One catalog and its search index per catalog spec, shared by every environment in a process.

A task names its catalog by a small JSON spec in its payload, so tasks stay
serialisable and environments built anywhere find the same products:

- ``{"kind": "generated", "num_products": 1000, "seed": 0}``: ``generate_catalog``;
- ``{"kind": "official", "products": PATH, "attributes": PATH | None}``: WebShop's files;
- ``{"kind": "memory", "name": NAME}``: a catalog given to ``register_catalog``.

Catalogs and indexes are read-only once built, so one copy serves all environments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentcredit.envs.webshop.catalog import Catalog, generate_catalog
from agentcredit.envs.webshop.official_catalog import load_products
from agentcredit.envs.webshop.search import SearchIndex


class Shop:
    """A catalog and its (lazily built) search index."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._index: SearchIndex | None = None

    @property
    def index(self) -> SearchIndex:
        if self._index is None:
            self._index = SearchIndex(self.catalog)
        return self._index

    def search(self, query: str) -> tuple[int, ...]:
        """Catalog indices of the results of ``query``, best first."""
        return self.index.search(query)


_SHOPS: dict[str, Shop] = {}
_MEMORY: dict[str, Catalog] = {}


def _key(spec: Mapping[str, Any]) -> str:
    return json.dumps(dict(spec), sort_keys=True)


def register_catalog(name: str, catalog: Catalog) -> dict[str, Any]:
    """Make ``catalog`` available to tasks as ``{"kind": "memory", "name": name}``; returns that
    spec."""
    spec = {"kind": "memory", "name": name}
    _MEMORY[name] = catalog
    _SHOPS.pop(_key(spec), None)
    return spec


def open_shop(spec: Mapping[str, Any]) -> Shop:
    """The shop of a catalog spec (built on first use, then shared)."""
    key = _key(spec)
    shop = _SHOPS.get(key)
    if shop is not None:
        return shop
    kind = spec.get("kind")
    if kind == "generated":
        catalog = generate_catalog(int(spec["num_products"]), int(spec["seed"]))
    elif kind == "official":
        catalog = load_products(spec["products"], spec.get("attributes"))
    elif kind == "memory":
        if spec.get("name") not in _MEMORY:
            raise KeyError(f"no catalog registered as {spec.get('name')!r}; call "
                           "register_catalog(name, catalog) first")
        catalog = _MEMORY[spec["name"]]
    else:
        raise ValueError(f"unknown catalog kind {kind!r} in {dict(spec)}; expected "
                         "'generated', 'official' or 'memory'")
    shop = _SHOPS[key] = Shop(catalog)
    return shop
