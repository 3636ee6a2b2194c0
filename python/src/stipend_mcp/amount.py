"""Variable cost: what a tool reports it really cost, capped at its price."""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypedDict

from .client import Money
from .price import Price

__all__ = ["Amount", "cents", "cents_or_units", "report_cost", "units_used"]


class Amount(TypedDict, total=False):
    """What one call really cost: cost for credits, units for a quota. A field left out is charged the price."""

    cost: Money
    units: int


def cents(n: int, currency: str) -> Amount:
    """An Amount of n cents (minor units) in currency."""
    return {"cost": {"cents": n, "currency": currency}}


def units_used(n: int) -> Amount:
    """An Amount of n quota units."""
    return {"units": n}


def cents_or_units(n: int, currency: str, u: int) -> Amount:
    """An Amount for a tool priced with credits_or_units: n cents if credits pay, u units if a quota does."""
    return {"cost": {"cents": n, "currency": currency}, "units": u}


@dataclass
class Meter:
    """What one call's tool reported; the gate keeps one per call charged on success."""

    tool: str
    price: Price
    log: logging.Logger
    reported: Amount = field(default_factory=lambda: Amount())

    def report(self, a: Amount) -> None:
        """Checks a against the price, caps it there and records it (the Go gate's meter.report)."""
        capped: Amount = {}
        over = False
        if "cost" in a:
            cost, price = a["cost"], self.price.cost
            if price is None:
                raise ValueError(f"stipend gate: report_cost: tool {self.tool} is not paid in credits, so it cannot report a cost")
            if cost.get("currency") != price["currency"]:
                raise ValueError(f"stipend gate: report_cost: cost in {cost.get('currency')!r}, but tool {self.tool} is priced in {price['currency']}")
            n = cost.get("cents")
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                raise ValueError(f"stipend gate: report_cost: cost cents must be a whole number of minor units, not negative; got {n!r}")
            over = n > price["cents"]
            capped["cost"] = {"cents": min(n, price["cents"]), "currency": price["currency"]}
        if "units" in a:
            u = a["units"]
            if not isinstance(u, int) or isinstance(u, bool) or u < 0:
                raise ValueError(f"stipend gate: report_cost: units must be a whole number, not negative; got {u!r}")
            most = self.price.units or 1
            over = over or u > most
            capped["units"] = min(u, most)
        if over:
            self.log.warning("stipend gate: the tool reported more than its price; charging the price (tool %s, reported %s)", self.tool, a)
        self.reported = capped


current_meter: ContextVar[Meter | None] = ContextVar("stipend_meter", default=None)


def report_cost(amount: Amount) -> bool:
    """Reports, from inside a tool, what the call really cost (the Go gate's mcpgate.Charge).

    When the tool succeeds the gate captures that amount instead of the
    price. The price is the most a call may cost: a report above it charges
    the price and is logged. Called more than once, the last report counts;
    a field a report leaves out is charged the price. It raises ValueError,
    and the report is ignored, for an amount the price cannot take (another
    currency, a tool credits cannot pay, a negative amount). Outside a call
    the gate charges on success (a free tool, a tool charged before it runs,
    a call run uncharged) it does nothing and returns False.
    """
    meter = current_meter.get()
    if meter is None:
        return False
    meter.report(amount)
    return True
