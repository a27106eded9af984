"""The ``env.webshop`` settings: the generated catalog and the goals sampled from it (no
engine is imported here, so the run config can hold them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WebShopConfig:
    """The embedded WebShop: a generated catalog and goals sampled from it.

    Attributes:
        num_products: catalog size (1,000 embedded default; 100,000 works).
        seed: seeds the catalog, the goals and the split shuffle.
        goals_per_product: goals sampled per product.
        valid_goals: goals in the ``valid`` split.
        test_goals: goals in the ``test`` split.
    """

    num_products: int = 1000
    seed: int = 0
    goals_per_product: int = 2
    valid_goals: int = 200
    test_goals: int = 200

    def __post_init__(self) -> None:
        for name in ("num_products", "goals_per_product"):
            if getattr(self, name) < 1:
                raise ValueError(f"WebShopConfig.{name}={getattr(self, name)}; expected >= 1")
        for name in ("valid_goals", "test_goals"):
            if getattr(self, name) < 0:
                raise ValueError(f"WebShopConfig.{name}={getattr(self, name)}; expected >= 0")

    def catalog_spec(self) -> dict[str, Any]:
        return {"kind": "generated", "num_products": self.num_products, "seed": self.seed}
