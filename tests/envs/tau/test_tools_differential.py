"""Our tau2 tools against the packages' own (``server.py``): every golden action of every task,
then invalid calls, comparing each tool message and the database after the calls."""

from __future__ import annotations

import importlib
import json
import re

import pytest

from agentcredit.envs.tau.database import Database
from agentcredit.envs.tau.domains import PACKAGES
from agentcredit.envs.tau.toolkit import BAD_ARGUMENTS, UNKNOWN_TOOL, call_tool, make_toolkit


def package_server(domain: str):
    return importlib.import_module(f"{PACKAGES[domain]}.server")


def package_call(server, db, name, arguments, toolkit_class):
    """The package's tool message for one call, with its function names spelt as tau2's
    (``get_order_details_state()`` -> ``RetailTools.get_order_details()``)."""
    try:
        content = server._content_from_result(server._execute_tool(db, name, arguments))
    except Exception as err:  # noqa: BLE001 - the MCP server turns every failure into text
        content = f"Error: {err}"
    return re.sub(r"\b(\w+)_state\(\)", rf"{toolkit_class}.\1()", content)


def fresh_package_db(domain) -> dict:
    return json.loads(json.dumps(domain.db))


def restore(package_db: dict, changes: dict, pristine: dict) -> None:
    """Put back the initial value of every record in ``changes`` (once the two databases are
    known equal, these are the only ones the package changed)."""
    for table, records in changes.items():
        for key in records:
            if key in pristine[table]:
                package_db[table][key] = json.loads(json.dumps(pristine[table][key]))
            else:
                del package_db[table][key]


def live_view(db: Database) -> dict:
    return {name: dict(table.items()) for name, table in db.tables.items()}


def test_every_golden_action_gives_the_packages_message_and_database(domain):
    server = package_server(domain.name)
    pristine = fresh_package_db(domain)
    calls, theirs = 0, fresh_package_db(domain)
    for task_id, task in domain.tasks.items():
        ours = Database(domain.db)
        toolkit = make_toolkit(domain.name, ours)
        for action in task["evaluation_criteria"]["actions"] or []:
            got = call_tool(toolkit, action["name"], dict(action["arguments"]))
            want = package_call(server, theirs, action["name"], dict(action["arguments"]),
                                type(toolkit).__name__)
            assert got.content == want, (task_id, action)
            calls += 1
        assert live_view(ours) == theirs, f"task {task_id}: the databases differ"
        restore(theirs, ours.changes(), pristine)
    assert domain.db == pristine, "a tool changed the shared initial database"
    assert calls > 100


INVALID_CALLS = {
    "retail": [
        ("get_order_details", {"order_id": "#W0000000"}),
        ("get_order_details", {}),
        ("get_order_details", {"order_id": "#W2611340", "verbose": True}),
        ("get_order_details", {"order_id": ["#W2611340"]}),
        ("find_user_id_by_name_zip", {"first_name": "Nobody", "last_name": "Here", "zip": "0"}),
        ("find_user_id_by_email", {"email": 7}),
        ("get_item_details", {"item_id": "0"}),
        ("get_product_details", {"product_id": "0"}),
        ("get_user_details", {"user_id": "nobody"}),
        ("cancel_pending_order", {"order_id": "#W2611340", "reason": "no longer needed"}),
        ("cancel_pending_order", {"order_id": "#W4817420", "reason": "changed my mind"}),
        ("cancel_pending_order", {"order_id": "#W4817420"}),
        ("cancel_pending_order", {"order_id": "#W5918442", "reason": "changed my mind"}),
        ("modify_pending_order_items", {"order_id": "#W5918442", "item_ids": ["1725100896"],
                                        "new_item_ids": ["1725100896"],
                                        "payment_method_id": "credit_card_5051208"}),
        ("modify_pending_order_items", {"order_id": "#W5918442",
                                        "item_ids": ["1725100896", "1725100896"],
                                        "new_item_ids": ["1", "2"],
                                        "payment_method_id": "credit_card_5051208"}),
        ("modify_pending_order_payment", {"order_id": "#W5918442",
                                          "payment_method_id": "credit_card_5051208"}),
        ("exchange_delivered_order_items", {"order_id": "#W4817420", "item_ids": ["6777246137"],
                                            "new_item_ids": ["1434748144"],
                                            "payment_method_id": "gift_card_8168843"}),
        ("exchange_delivered_order_items", {"order_id": "#W4817420", "item_ids": ["6777246137"],
                                            "new_item_ids": [],
                                            "payment_method_id": "gift_card_8168843"}),
        ("exchange_delivered_order_items", {"order_id": "#W4817420", "item_ids": ["0"],
                                            "new_item_ids": ["1"],
                                            "payment_method_id": "gift_card_8168843"}),
        ("return_delivered_order_items", {"order_id": "#W4817420", "item_ids": ["0"],
                                          "payment_method_id": "gift_card_8168843"}),
        ("modify_pending_order_address", {"order_id": "#W2611340", "address1": "a",
                                          "address2": "", "city": "c", "state": "s",
                                          "country": "USA", "zip": "1"}),
        ("modify_pending_order_payment", {"order_id": "#W4817420",
                                          "payment_method_id": "paypal_0"}),
        ("modify_pending_order_items", {"order_id": "#W4817420", "item_ids": ["0"],
                                        "new_item_ids": ["1"], "payment_method_id": "x"}),
        ("exchange_delivered_order_items", {"order_id": "#W4817420", "item_ids": [],
                                            "new_item_ids": [], "payment_method_id": "x"}),
        ("return_delivered_order_items", {"order_id": "#W4817420", "item_ids": [],
                                          "payment_method_id": "x"}),
        ("modify_user_address", {"user_id": "nobody", "address1": "a", "address2": "",
                                 "city": "c", "state": "s", "country": "USA", "zip": "1"}),
        ("calculate", {"expression": "2 + x"}),
        ("calculate", {"expression": "1 / 0"}),
        ("calculate", {"expression": "(2 +"}),
        ("calculate", {"expression": 12}),
        ("transfer_to_human_agents", {}),
    ],
    "airline": [
        ("get_reservation_details", {"reservation_id": "ZZZZZZ"}),
        ("get_reservation_details", {}),
        ("get_user_details", {"user_id": "nobody"}),
        ("get_user_details", {"user_id": "mia_li_3668", "extra": 1}),
        ("get_flight_status", {"flight_number": "HAT001", "date": "2030-01-01"}),
        ("get_flight_status", {"flight_number": "XX999", "date": "2024-05-01"}),
        ("search_direct_flight", {"origin": "JFK", "destination": "SFO"}),
        ("cancel_reservation", {"reservation_id": "ZZZZZZ"}),
        ("send_certificate", {"user_id": "nobody", "amount": 100}),
        ("update_reservation_passengers", {"reservation_id": "4WQ150", "passengers": []}),
        ("update_reservation_baggages", {"reservation_id": "4WQ150", "total_baggages": 9,
                                         "nonfree_baggages": 9, "payment_id": "nothing_1"}),
        ("update_reservation_flights", {"reservation_id": "4WQ150", "cabin": "economy",
                                        "flights": [{"flight_number": "HAT001",
                                                     "date": "2031-01-01"}],
                                        "payment_id": "gift_card_3576581"}),
        ("book_reservation", {"user_id": "mia_li_3668", "origin": "PHL", "destination": "LGA",
                              "flight_type": "one_way", "cabin": "economy",
                              "flights": [{"flight_number": "HAT001", "date": "2024-05-01"}],
                              "passengers": [], "payment_methods": [], "total_baggages": 0,
                              "nonfree_baggages": 0, "insurance": "no"}),
        ("book_reservation", {"user_id": "mia_li_3668"}),
        *[("book_reservation", {"user_id": "mia_li_3668", "origin": "PHL", "destination": "LGA",
                                "flight_type": "one_way", "cabin": "economy",
                                "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}],
                                "passengers": [{"first_name": "Mia", "last_name": "Li",
                                                "dob": "1990-04-05"}],
                                "payment_methods": payments, "total_baggages": 0,
                                "nonfree_baggages": 0, "insurance": "no"})
          for payments in ([{"payment_id": "credit_card_4421486", "amount": 1}],
                           [{"payment_id": "paypal_1", "amount": 137}],
                           [{"payment_id": "certificate_4856383", "amount": 100},
                            {"payment_id": "certificate_4856383", "amount": 37}])],
        ("update_reservation_baggages", {"reservation_id": "NO6JO3", "total_baggages": 2,
                                         "nonfree_baggages": 2,
                                         "payment_id": "certificate_4856383"}),
        ("calculate", {"expression": "3 * (4 - 1) / 0"}),
    ],
}


@pytest.mark.parametrize("name_only", [False, True])
def test_invalid_calls_give_the_packages_message_and_change_nothing(domain, name_only):
    server = package_server(domain.name)
    calls = INVALID_CALLS[domain.name]
    if name_only:  # the unknown tools: names tau2 does not have
        calls = [("delete_database", {}), ("get_order", {"order_id": "#W1"})]
    theirs, pristine = fresh_package_db(domain), fresh_package_db(domain)
    for name, arguments in calls:
        ours = Database(domain.db)
        got = call_tool(make_toolkit(domain.name, ours), name, dict(arguments))
        want = package_call(server, theirs, name, dict(arguments),
                            type(make_toolkit(domain.name, ours)).__name__)
        assert got.error and got.content == want, (name, arguments, got.content, want)
        assert ours.changes() == {}, (name, arguments)
        if theirs != pristine:  # the package may change its database before it fails
            theirs = fresh_package_db(domain)
        if name_only:
            assert got.kind == UNKNOWN_TOOL


def test_arguments_that_do_not_fit_a_tool_are_bad_arguments_in_tau2s_words():
    from agentcredit.envs.tau.domains import load_domain

    toolkit = make_toolkit("retail", Database(load_domain("retail").db))
    missing = call_tool(toolkit, "get_order_details", {})
    extra = call_tool(toolkit, "get_order_details", {"order_id": "#W2611340", "x": 1})
    refused = call_tool(toolkit, "get_order_details", {"order_id": "#W0"})
    assert missing.kind == extra.kind == BAD_ARGUMENTS
    assert missing.content == ("Error: RetailTools.get_order_details() missing 1 required "
                               "positional argument: 'order_id'")
    assert extra.content == ("Error: RetailTools.get_order_details() got an unexpected keyword "
                             "argument 'x'")
    assert (refused.kind, refused.content) == ("tool_error", "Error: Order not found")
