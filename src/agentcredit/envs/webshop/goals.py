"""Shopping goals as in WebShop: a target product, some of its attributes, one value per
option group, and a price bound above its price; phrased by templates.

The price bound follows WebShop's goal builder: of the (at most four) multiples
of ten above the target's price, two are drawn and the larger is the bound;
with fewer than two (prices above 970) the goal has no bound and its
instruction names none.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from agentcredit.envs.webshop.catalog import Catalog, Product
from agentcredit.envs.webshop.reward import NO_PRICE_BOUND, GoalSpec

PRICE_STEPS: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))

_REQUESTS = (
    "i need {ptype} that is {attrs}",
    "find me {attrs} {ptype}",
    "i am looking for {ptype} with {attrs}",
    "i want to buy {ptype} which is {attrs}",
    "can you get me {attrs} {ptype}",
    "i'd like {ptype} that has {attrs}",
    "show me {ptype}, {attrs}",
    "i'm searching for {attrs} {ptype}",
)
_OPTION_LEADS = (" with {opts}", " in {opts}", ", {opts}")


@dataclass(frozen=True)
class Goal:
    """One shopping goal (WebShop's goal record).

    Attributes:
        asin: the target product the goal was made from.
        category: the target's category (the task type).
        query: the target's query.
        name: the target's title (the reward's product-type reference).
        product_category: the target's category path.
        instruction_text: what the agent is told.
        attributes: requested attribute phrases.
        goal_options: requested option values.
        option_names: the target's option group of each requested value ("" if unknown).
        price_upper: the price bound (``NO_PRICE_BOUND`` when the goal has none).
    """

    asin: str
    category: str
    query: str
    name: str
    product_category: str
    instruction_text: str
    attributes: tuple[str, ...]
    goal_options: tuple[str, ...]
    option_names: tuple[str, ...]
    price_upper: float

    def spec(self) -> GoalSpec:
        """The reward's view of this goal."""
        return GoalSpec(title=self.name, query=self.query,
                        product_category=self.product_category, attributes=self.attributes,
                        options=self.goal_options, price_upper=self.price_upper)

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Goal:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def price_upper_for(price: float, rng: random.Random) -> float | None:
    """The larger of two draws among the next four multiples of ten above ``price``."""
    steps = [p for p in PRICE_STEPS if p > price][:4]
    if len(steps) < 2:
        return None
    return max(rng.sample(steps, 2))


def _join(items: Sequence[str], rng: random.Random) -> str:
    if len(items) == 1:
        return items[0]
    comma = "," if rng.random() < 0.5 else ""
    return ", ".join(items[:-1]) + f"{comma} and {items[-1]}"


def phrase(ptype: str, attributes: Sequence[str], options: Sequence[tuple[str, str]],
           price_upper: float | None, rng: random.Random) -> str:
    """A templated instruction (lower case, as WebShop's)."""
    text = rng.choice(_REQUESTS).format(ptype=ptype, attrs=_join(attributes, rng))
    if options:
        opts = ", and ".join(f"{name}: {value}" for name, value in options)
        text += rng.choice(_OPTION_LEADS).format(opts=opts)
    if price_upper is not None:
        text += f", and price lower than {price_upper:.2f} dollars"
    return text


def make_goal(product: Product, rng: random.Random) -> Goal:
    """A goal whose target is ``product``: 1-3 of its attributes, one value per option group."""
    if not product.attributes:
        raise ValueError(f"product {product.asin} has no attributes to request")
    attrs = tuple(rng.sample(product.attributes, rng.randint(1, min(3, len(product.attributes)))))
    options = [(name, rng.choice(values)) for name, values in product.options if values]
    upper = price_upper_for(product.price, rng)
    return Goal(asin=product.asin, category=product.category, query=product.query,
                name=product.title, product_category=product.product_category,
                instruction_text=phrase(product.query, attrs, options, upper, rng),
                attributes=attrs, goal_options=tuple(v for _, v in options),
                option_names=tuple(n for n, _ in options),
                price_upper=NO_PRICE_BOUND if upper is None else upper)


def _request(goal: Goal) -> tuple:
    return goal.asin, frozenset(goal.attributes), goal.goal_options, goal.price_upper


def sample_goals(catalog: Catalog, goals_per_product: int, seed: int,
                 tries: int = 10) -> list[Goal]:
    """Up to ``goals_per_product`` distinct goals for each product with attributes, in catalog
    order (a product whose requests repeat ``tries`` times in a row gets fewer)."""
    rng, goals = random.Random(seed), []
    for product in catalog.products:
        if not product.attributes:
            continue
        requests: set[tuple] = set()
        for _ in range(goals_per_product):
            for _ in range(tries):
                goal = make_goal(product, rng)
                if _request(goal) not in requests:
                    requests.add(_request(goal))
                    goals.append(goal)
                    break
    return goals


def split_goals(goals: Sequence[Goal], valid: int, test: int,
                seed: int) -> dict[str, list[Goal]]:
    """Shuffle by ``seed``; the first ``test`` goals are test, the next ``valid`` valid, the rest
    train."""
    if valid + test >= len(goals):
        raise ValueError(f"valid={valid} + test={test} goals leave none of {len(goals)} for "
                         "train; lower them or add products")
    order = list(goals)
    random.Random(seed).shuffle(order)
    return {"test": order[:test], "valid": order[test:test + valid],
            "train": order[test + valid:]}
