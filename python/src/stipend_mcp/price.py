"""Prices of tools, and the terms the gate shows for them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from .client import Money

__all__ = ["LIMITS", "Policy", "Price", "credits", "credits_or_units", "describe_terms", "free", "units"]

Policy = Literal["on_success", "before"]
"""When a priced call is charged: "on_success" (the default) holds the price
before the tool runs and charges it only if the tool succeeds; "before"
charges before the tool runs, and the charge stands whatever the tool does."""

LIMITS = {"max_name_length": 200, "max_units": 1_000_000, "max_cents": 2**53 - 1}
"""Stipend's limits on names, units and cents, checked when a Gate is built."""

_CURRENCY = re.compile(r"^[A-Z]{3}$")
_NAME = re.compile(r"^[\x20-\x7e]{1,200}$")


@dataclass(frozen=True)
class Price:
    """What one call of a tool costs, and when it is charged.

    A free price runs the tool without a call to Stipend. Otherwise cost is
    charged to a credits entitlement (None: credits cannot pay), units (1 if
    None) to a quota; a subscription covers either. Under "on_success" the
    price is the most a call may cost: a tool that knows its real cost only
    afterwards reports it with report_cost.
    """

    free: bool = False
    cost: Money | None = None
    units: int | None = None
    policy: Policy | None = None

    def charged_before(self) -> Price:
        """This price, charged before the tool runs: for tools whose effect cannot be undone."""
        return Price(free=self.free, cost=self.cost, units=self.units, policy="before")

    def problem(self) -> str | None:
        """What is wrong with the price, as Stipend would refuse its charge; None if nothing."""
        if self.free:
            return None if self.cost is None and self.units is None and self.policy is None else "is free, so it can have no cost, units or policy"
        if self.cost is not None:
            cents = self.cost.get("cents")
            if not isinstance(cents, int) or isinstance(cents, bool) or not 0 <= cents <= LIMITS["max_cents"]:
                return f"cost cents must be a whole, non-negative number of minor units (at most {LIMITS['max_cents']}); got {cents!r}"
            currency = self.cost.get("currency")
            if not isinstance(currency, str) or not _CURRENCY.match(currency):
                return f'cost currency must be a three-letter upper-case ISO 4217 code such as "USD"; got {currency!r}'
        if self.units is not None and (not isinstance(self.units, int) or not 1 <= self.units <= LIMITS["max_units"]):
            return f"units must be a whole number from 1 to {LIMITS['max_units']} (leave it out for 1); got {self.units!r}"
        if self.policy not in (None, "on_success", "before"):
            return f'policy must be "on_success" or "before"; got {self.policy!r}'
        return None

    def terms(self, default_policy: Policy = "on_success") -> dict[str, Any]:
        """How the tool is charged, as tools/list _meta["io.stipend/price"] and refusals show it."""
        if self.free:
            return {"free": True}
        t: dict[str, Any] = {}
        if self.cost is not None:
            t["cost"] = {"cents": self.cost["cents"], "currency": self.cost["currency"]}
        t["units"] = self.units or 1
        t["policy"] = self.policy or default_policy
        return t


def free() -> Price:
    """The price of a tool that runs without being charged."""
    return Price(free=True)


def credits(cents: int, currency: str) -> Price:
    """cents of currency, paid from credits (or with one quota unit, or covered by a subscription)."""
    return Price(cost={"cents": cents, "currency": currency})


def units(n: int) -> Price:
    """n quota units (or covered by a subscription)."""
    return Price(units=n)


def credits_or_units(cents: int, currency: str, n: int) -> Price:
    """Payable either way: cents from credits or n units from a quota."""
    return Price(cost={"cents": cents, "currency": currency}, units=n)


def describe_terms(terms: dict[str, Any]) -> str:
    """Terms for people, such as "5 cents USD or 1 unit" (the Go gate's Terms.String)."""
    if terms.get("free"):
        return "free"
    u = terms.get("units") or 1
    unit_text = "1 unit" if u == 1 else f"{u} units"
    cost = terms.get("cost")
    return f"{cost['cents']} cents {cost['currency']} or {unit_text}" if cost else unit_text


def valid_name(s: object) -> bool:
    """Whether s is a name Stipend takes: 1-200 printable ASCII characters."""
    return isinstance(s, str) and bool(_NAME.match(s))
