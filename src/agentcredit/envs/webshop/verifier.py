"""The WebShop verifier for VICT (docs/vict.md §4.1; VICT paper Table 10 and case study F.2).

States are the engine's snapshots (``snapshot.py``); the atoms judge the
*selected* product (the one last opened, and after ``buy now`` the purchased
one) with the selected options, so an item page makes them evaluable before
the purchase and the purchase finalises them. Evidence is cumulative:
``evidence:<section>`` holds the asin whose section an observation last showed
(``title``, ``price``, ``options`` on an item page; ``features``,
``description``, ``reviews`` on those pages; ``purchase`` on the done page),
``evidence:results`` the query and page of the last results list, and
``evidence:results:<asin>`` the query and page of the last results list that listed
that product, so a reveal edge marks each step that showed a new product's evidence.

Atoms (``A`` requested attributes, ``O`` requested options), as ``atom`` (role):
status on the selected product (UNK when none):

- ``product_type`` (graded, value ``r_type``): SAT iff its title shares a noun with the
  target's (``r_type >= 0.1``).
- ``title_overlap`` (prerequisite): SAT iff ``title_score >= 0.1`` (``r_type >= 0.5``).
- ``category_match`` (prerequisite): SAT iff same query, >= 2 shared category segments,
  or ``title_score > 0.2``.
- ``attribute:<a>`` (hard): SAT iff attribute ``a`` matches (fuzzy, or in
  title/bullets/description).
- ``option:<o>`` (hard): SAT iff a selected value matches ``o``.
- ``price_under_budget`` (hard): SAT iff price <= the goal's bound.
- ``purchase_committed`` (hard): SAT iff ``buy now`` was clicked (never UNK).
- ``wrong_purchase`` (penalty): VIOL iff bought with ``title_score == 0`` (a product of
  another type).

``F``: 0 unless ``purchase_committed`` is SAT and ``wrong_purchase`` is not
VIOL; otherwise ``r_type · (#SAT attributes + #SAT options + [price SAT]) /
(A + O + 1)``, where ``r_type`` is read off the type ladder: 0 unless
``product_type`` is SAT, 0.1 unless ``title_overlap`` is too, 0.5 unless
``category_match`` is too, else 1. This is ``reward.py``'s formula term for
term, so ``F`` reproduces ``V`` exactly; ``wrong_purchase`` is VIOL only when
``r_type = 0``, so its factor never changes ``F`` on a real state.
``WebShopAggregator`` holds ``F`` as plain data (the ladder, the counted atom
ids), so a trace carries it without the catalogue the predicates close over.

Dependencies: ``category_match`` -> ``title_overlap`` -> ``product_type``, and
every attribute atom -> ``product_type`` (a fact about the requested kind of product).
The option and price atoms depend on nothing: the VICT paper's failed purchase (Table 15)
writes ``color_option_selected=sat`` with a ``+`` while the type is UNSAT, which a
dependency on the type would make an invalid edge. ``purchase_committed`` and
``wrong_purchase`` depend on the selection (every option atom and the price): a purchase
commits the product with its chosen options at its price, so a success's core holds the
option writes (setting an option UNSAT voids the purchase) and a wrong purchase's core pulls
in the SAT selection as ancestors of the violation, crediting the option clicks ``+`` while
``buy now`` is blamed (as ALFWorld's premature placement pulls in the held object). The
commit is ``click[buy now]``; it finalises every atom.

Support edges (docs/vict.md §4.3): clicking a product makes its option clicks and
``buy now`` admissible, but that click changes ``product:asin``, which every product atom
reads, so it is a witness of them all, not their support; the search (or page turn) that
listed the product made the click admissible and is the support of the click's writes.

Witnesses (docs/vict.md §4.3): every atom about the product is bound
(``_bound_to_product``) to the product the rollout ends on, bought or else open,
so only steps taken while that product is open write or reveal what it reads, and
only results lists that listed it reveal its title and price.

Irreversibility (``Atom.irreversible``, the paper's Table 9 flag; metadata for the audit
and the ledger): only ``purchase_committed`` and ``wrong_purchase`` are irreversible,
since ``buy now`` ends the episode. Every product atom judges the open product, so
opening another product or choosing another option value undoes it before the purchase.

Instrumentation level (``Atom.level``, the paper's appendix C): ``purchase_committed``
is Level 0 (the ``purchased`` field of the final state); every other atom is Level 1, a
branch or score term of ``get_reward`` recomputed from the selected product.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentcredit.envs.base import Task
from agentcredit.envs.webshop.actions import parse_action
from agentcredit.envs.webshop.catalog import Product
from agentcredit.envs.webshop.goals import Goal
from agentcredit.envs.webshop.pages import SEP
from agentcredit.envs.webshop.reward import (
    FUZZY_THRESHOLD,
    GoalSpec,
    Purchase,
    attribute_matched,
    combine,
    fuzzy_score,
    option_matched,
    price_ok,
    reward,
    type_match,
)
from agentcredit.envs.webshop.shop import Shop
from agentcredit.envs.webshop.snapshot import (
    ASIN,
    ATTRIBUTES,
    BULLETS,
    CATEGORY_PATH,
    DESCRIPTION,
    PAGE,
    PRICE,
    PRODUCT_QUERY,
    PURCHASED,
    QUERY,
    RESULTS_PAGE,
    SELECTED,
    TITLE,
    original_score,
    product_fields,
    purchase_of,
)
from agentcredit.verifier.atoms import Atom, State, Status, Verifier
from agentcredit.verifier.trace import guarded

EV = "evidence:"
#: ``r_type`` once each rung is SAT, climbed in order (``reward.type_match``'s grades).
TYPE_LADDER = (("product_type", 0.1), ("title_overlap", 0.5), ("category_match", 1.0))


def _on_product(check):
    """An atom predicate that is UNK without a selected product, else SAT/UNSAT by ``check``."""
    def predicate(state: State, evidence: Any) -> Status:
        purchase = purchase_of(state)
        if purchase is None:
            return Status.UNK
        return Status.SAT if check(purchase) else Status.UNSAT
    return predicate


def _bound_to_product(state_vars: tuple[str, ...]):
    """``Atom.binds`` of a product atom: its variables, each guarded by the product whose
    status the rollout ends on (the one bought, else the one open at the end).

    A product field or option changing, or a product page's evidence showing, counts as a
    witness only while that product is the open one; clicking a product that is later
    abandoned, or choosing its options, writes nothing these atoms read. A results list
    is evidence of that product only when it listed it (``evidence:results:<asin>``); a
    search whose results do not show the product reveals nothing about it.
    """
    def binds(state: State, evidence: Any) -> tuple[str, ...]:
        asin = state.get(ASIN)
        if not asin:
            return ()  # no product selected at the end: no product fact was written
        keys = []
        for var in state_vars:
            if var == EV + "results":
                keys.append(f"{EV}results:{asin}")
            elif var.startswith(EV):
                keys.append(guarded(var, var, asin))  # that section showed this product
            else:
                keys.append(guarded(var, ASIN, asin))
        return tuple(keys)
    return binds


def _unique_ids(prefix: str, items: tuple[str, ...]) -> list[str]:
    ids: list[str] = []
    for item in items:
        base = f"{prefix}:{item}"
        atom_id, n = base, 1
        while atom_id in ids:
            n += 1
            atom_id = f"{base}#{n}"
        ids.append(atom_id)
    return ids


def build_atoms(goal: Goal) -> tuple[Atom, ...]:
    """The atoms of one goal, in a fixed order (see the module table)."""
    spec = goal.spec()

    def types(p: Purchase):
        return type_match(p, spec)

    def r_type(state: State, evidence: Any) -> float:
        purchase = purchase_of(state)
        return 0.0 if purchase is None else types(purchase).r_type

    title_vars = (ASIN, TITLE, EV + "title")
    atoms = [
        Atom("product_type", _on_product(lambda p: types(p).title_score > 0), "on_evidence", (),
             title_vars + (EV + "results",), "graded", value=r_type,
             audit_source="get_type_reward: title nouns shared with the target (r_type > 0)",
             binds=_bound_to_product(title_vars + (EV + "results",)), level=1),
        Atom("title_overlap", _on_product(lambda p: types(p).title_score >= 0.1), "on_evidence",
             ("product_type",), title_vars, "prerequisite",
             audit_source="get_type_reward: title_score >= 0.1 (r_type >= 0.5)",
             binds=_bound_to_product(title_vars), level=1),
        Atom("category_match", _on_product(lambda p: types(p).matched),
             "on_evidence", ("title_overlap",), title_vars + (PRODUCT_QUERY, CATEGORY_PATH),
             "prerequisite",
             audit_source="get_type_reward: query match, category match or title_score > 0.2",
             binds=_bound_to_product(title_vars + (PRODUCT_QUERY, CATEGORY_PATH)), level=1),
    ]
    attr_vars = (ASIN, ATTRIBUTES, TITLE, BULLETS, DESCRIPTION,
                 EV + "title", EV + "features", EV + "description")
    for atom_id, attribute in zip(_unique_ids("attribute", spec.attributes), spec.attributes,
                                  strict=True):
        atoms.append(Atom(atom_id, _on_product(lambda p, a=attribute: attribute_matched(a, p)),
                          "on_evidence", ("product_type",), attr_vars, "hard",
                          audit_source="get_attribute_reward: fuzzy attribute or text match",
                          binds=_bound_to_product(attr_vars), level=1))
    names = goal.option_names or ("",) * len(spec.options)
    for atom_id, option, name in zip(_unique_ids("option", spec.options), spec.options, names,
                                     strict=True):
        option_vars = (ASIN, *((SELECTED + name,) if name else ()), EV + "options")
        atoms.append(Atom(atom_id, _on_product(lambda p, o=option: option_matched(o, p.selected)),
                          "online", (), option_vars,
                          "hard", audit_source="get_option_reward: selected value matches",
                          binds=_bound_to_product(option_vars), level=1))
    price_vars = (ASIN, PRICE, EV + "price", EV + "results")
    selection = (*(a.atom_id for a in atoms if a.atom_id.startswith("option:")),
                 "price_under_budget")
    atoms += [
        Atom("price_under_budget",
             _on_product(lambda p: price_ok(p.price, spec.price_upper)), "on_evidence",
             (), price_vars, "hard",
             audit_source="get_reward: price <= price_upper", binds=_bound_to_product(price_vars),
             level=1),
        Atom("purchase_committed",
             lambda s, e: Status.SAT if s.get(PURCHASED) else Status.UNSAT, "on_commit",
             selection, (PURCHASED,), "hard", audit_source="click[buy now] ends the episode",
             irreversible=True, level=0),
        Atom("wrong_purchase", lambda s, e: _wrong_purchase(spec, s), "on_commit", selection,
             (PURCHASED, ASIN, TITLE), "penalty",
             audit_source="bought a product whose title shares no noun with the target's",
             binds=_bound_to_product((PURCHASED, ASIN, TITLE)), irreversible=True, level=1),
    ]
    return tuple(atoms)


def _wrong_purchase(spec: GoalSpec, state: State) -> Status:
    purchase = purchase_of(state)
    if state.get(PURCHASED) and purchase is not None \
            and type_match(purchase, spec).title_score == 0:
        return Status.VIOL
    return Status.UNSAT


def counted_atoms(atoms: tuple[Atom, ...]) -> tuple[str, ...]:
    """The atoms the reward counts: every attribute, every option, and the price."""
    return tuple(a.atom_id for a in atoms if a.atom_id.startswith(("attribute:", "option:"))
                 or a.atom_id == "price_under_budget")


@dataclass(frozen=True)
class WebShopAggregator:
    """``F`` (see the module notes): WebShop's reward recomputed from atom statuses.

    Attributes:
        counted: the atoms the reward counts (``counted_atoms``), ``A + O + 1`` of them.
        type_ladder: ``(atom id, r_type)`` rungs: ``r_type`` is the level of the last
            rung SAT before the first that is not.
        commit: the atom that must be SAT for any reward (the purchase).
        penalty: the atom whose VIOL zeroes ``F``.
    """

    counted: tuple[str, ...]
    type_ladder: tuple[tuple[str, float], ...] = TYPE_LADDER
    commit: str = "purchase_committed"
    penalty: str = "wrong_purchase"

    def __call__(self, statuses: Mapping[str, Status]) -> float:
        if statuses[self.commit] is not Status.SAT or statuses[self.penalty] is Status.VIOL:
            return 0.0
        r_type = 0.0
        for atom_id, level in self.type_ladder:
            if statuses[atom_id] is not Status.SAT:
                break
            r_type = level
        matched = sum(statuses[j] is Status.SAT for j in self.counted)
        return combine(r_type, matched, len(self.counted))


# EVIDENCE

_RESULTS_HEADER = re.compile(r"Page \d+ \(Total results: \d+\)")
_PAGER = ("< Prev", "Next >")


def listed_asins(text: str) -> tuple[str, ...]:
    """The products a results page lists, in order: after the ``Page n (Total results: m)``
    segment and the pager buttons come ``asin, title, price`` triples (``pages.results_page``)."""
    parts = [p.strip() for p in text.split(SEP)]
    start = next((i + 1 for i, p in enumerate(parts) if _RESULTS_HEADER.fullmatch(p)), None)
    if start is None:
        return ()
    while start < len(parts) and parts[start] in _PAGER:
        start += 1
    return tuple(parts[start::3])


def extract_evidence(text: str, state: State) -> dict[str, Any]:
    """What the page in ``state`` (the one ``text`` shows) revealed, keyed by section."""
    page, asin = state.get(PAGE), state.get(ASIN, "")
    if page == "results":
        shown = f"{state.get(QUERY, '')}#{state.get(RESULTS_PAGE, 0)}"
        return {EV + "results": shown} | {f"{EV}results:{a}": shown for a in listed_asins(text)}
    if page == "item":
        return {EV + "title": asin, EV + "price": asin, EV + "options": asin}
    if page in ("features", "description", "reviews"):
        return {EV + page: asin}
    if page == "done":
        return {EV + "purchase": asin}
    return {}


# MUTATIONS (edits of a terminal state, docs/vict.md §4.2)

def _mutations(goal: Goal, shop: Shop) -> dict[str, Any]:
    spec = goal.spec()
    catalog = shop.catalog

    def change_price(s: State, e: Any):
        if PRICE not in s:
            return s, e
        over = float(s[PRICE]) <= spec.price_upper
        return {**s, PRICE: spec.price_upper + 10.0 if over else round(spec.price_upper / 2, 2)}, e

    def remove_required_attribute(s: State, e: Any):
        if not spec.attributes or PRICE not in s:
            return s, e
        gone = spec.attributes[0]

        def strip(text: str) -> str:
            lowered, out, start = text.lower(), [], 0
            while (hit := lowered.find(gone, start)) >= 0:
                out.append(text[start:hit])
                start = hit + len(gone)
            return "".join(out) + text[start:]

        return {**s,
                ATTRIBUTES: tuple(a for a in s[ATTRIBUTES]
                                  if fuzzy_score(a, gone) <= FUZZY_THRESHOLD),
                TITLE: strip(s[TITLE]), BULLETS: tuple(strip(b) for b in s[BULLETS]),
                DESCRIPTION: strip(s[DESCRIPTION])}, e

    def change_selected_option(s: State, e: Any):
        if not spec.options:
            return s, e
        wanted = spec.options[0]
        product = catalog.get(s.get(ASIN, ""))
        for key in sorted(k for k in s if k.startswith(SELECTED)):
            if not option_matched(wanted, [s[key]]):
                continue
            values = dict(product.options).get(key[len(SELECTED):], ()) if product else ()
            other = next((v for v in values if not option_matched(wanted, [v])), None)
            out = dict(s)
            if other is None:
                del out[key]
            else:
                out[key] = other
            return out, e
        return s, e

    def swap_purchased_product(s: State, e: Any):
        purchase = purchase_of(s)
        if purchase is None:
            return s, e
        replacement = _replacement(catalog, s, purchase, spec)
        if replacement is None:
            return s, e
        return {**s, **product_fields(replacement)}, e

    return {"change_price": change_price,
            "remove_required_attribute": remove_required_attribute,
            "change_selected_option": change_selected_option,
            "swap_purchased_product": swap_purchased_product}


def _replacement(catalog, state: State, purchase: Purchase, spec: GoalSpec) -> Product | None:
    """The first near-duplicate (same query, else any product) that scores below the purchase."""
    current = reward(purchase, spec).total
    same = catalog.by_query.get(purchase.query, ())
    for pool in (same, range(len(catalog))):
        for i in pool:
            product = catalog.products[i]
            if product.asin == state.get(ASIN):
                continue
            candidate = Purchase(product.title, product.query, product.product_category,
                                 product.attributes, product.bullet_points,
                                 product.description, product.price, purchase.selected)
            if reward(candidate, spec).total < current:
                return product
    return None


def build_verifier(task: Task, goal: Goal, shop: Shop) -> Verifier:
    """The VICT verifier of one WebShop goal."""
    atoms = build_atoms(goal)
    scope = tuple(a.atom_id for a in atoms)

    def is_commit(action: str) -> bool:
        return parse_action(action) == ("click", "buy now")

    spec = goal.spec()
    return Verifier(
        task_id=task.task_id, atoms=atoms,
        aggregate=WebShopAggregator(counted_atoms(atoms)),
        original=lambda state: original_score(spec, state),
        is_commit=is_commit,
        commit_scope=lambda action: scope if is_commit(action) else (),
        extract_evidence=extract_evidence,
        mutations=_mutations(goal, shop),
        env="webshop",
    )
