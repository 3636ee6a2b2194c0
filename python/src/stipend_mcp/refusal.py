"""Refusals: what a call the gate did not run is answered with."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from .client import Denial
from .price import describe_terms

__all__ = ["Refusal", "RefusalKind", "refusal_text"]

RefusalKind = Literal[
    "payment_required",
    "billing_unavailable",
    "idempotency_key_conflict",
    "agent_unknown",
    "tool_not_priced",
    "billing_error",
    "idempotency_key_spent",
    "hold_expired",
]
"""The kinds of refusal, as the Go gate names them (mcpgate/refusal.go)."""


class Refusal(TypedDict):
    """The machine-readable refusal: the result's _meta["io.stipend/refusal"] (and its
    structuredContent when the tool declares no output schema)."""

    error: RefusalKind
    message: str
    service: str
    tool: str
    price: NotRequired[dict[str, Any]]
    reasons: NotRequired[list[Denial]]
    purchaseUrl: NotRequired[str]
    retryable: NotRequired[bool]


NO_ENTITLEMENT = "this agent has no entitlement for it"


def refusal_text(r: Refusal) -> str:
    """The refusal as the model (and the person behind it) reads it: the Go gate's Refusal.Text, word for word.

    Such as "payment required: no entitlement of this agent covers tool
    forecast. Price per call: at most 5 cents USD or 1 unit, charged only if
    the tool succeeds. Reasons: not_found (this agent has no entitlement for
    it). Buy credits at https://example.com/buy." The purchase URL is in the
    text because hosts drop the structuredContent of error results.
    """
    text = r["message"]
    price = r.get("price")
    if price:
        terms = describe_terms(price)
        policy = price.get("policy")
        if policy == "on_success":
            text += f". Price per call: at most {terms}, charged only if the tool succeeds"
        elif policy == "before":
            text += f". Price per call: {terms}, charged before the tool runs"
        else:
            text += f". Price per call: {terms}"
    for i, d in enumerate(r.get("reasons") or []):
        ent = d.get("entitlementId")
        text += (". Reasons:" if i == 0 else ";") + f" {d['reason']} ({f'entitlement {ent}' if ent else NO_ENTITLEMENT})"
    if r.get("purchaseUrl"):
        text += ". Buy credits at " + r["purchaseUrl"]
    return text + "."
