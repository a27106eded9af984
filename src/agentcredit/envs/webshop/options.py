"""The ``env.webshop`` settings: the generated catalog and the goals sampled from it (no
engine is imported here, so the run config can hold them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from agentcredit.config.schema import SEED_MAX, validate


@dataclass(frozen=True)
class WebShopConfig:
    """The embedded WebShop: a generated catalog and goals sampled from it.

    Attributes:
        num_products: catalog size (1,000 embedded default; 100,000 works; at most a
            million, held in memory and indexed).
        seed: seeds the catalog, the goals and the split shuffle.
        goals_per_product: goals sampled per product, 1 to 100.
        valid_goals: goals in the ``valid`` split, at most 100,000.
        test_goals: goals in the ``test`` split, at most 100,000.
    """

    _limits: ClassVar[dict[str, tuple]] = {
        "num_products": (1, 1_000_000), "seed": (0, SEED_MAX), "goals_per_product": (1, 100),
        "valid_goals": (0, 100_000), "test_goals": (0, 100_000)}

    num_products: int = 1000
    seed: int = 0
    goals_per_product: int = 2
    valid_goals: int = 200
    test_goals: int = 200

    def __post_init__(self) -> None:
        validate(self)

    def catalog_spec(self) -> dict[str, Any]:
        return {"kind": "generated", "num_products": self.num_products, "seed": self.seed}
