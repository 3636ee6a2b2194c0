"""An async client of Stipend's REST API, on httpx, with the Go client's retries.

Calls that are safe to repeat (reads; consume, check and authorize, which
carry their idempotency key in the body; capture and release of a hold; and
writes sent with an Idempotency-Key header) are retried on network errors and
on 503 and 429 answers, with full-jitter exponential backoff (4 attempts in
all, windows from 50 ms doubling up to 2 s), never sooner than the answer's
Retry-After and not at all when Retry-After is above 10 s; every attempt sends
the same body, so the same key. Error answers raise StipendError, which holds
the RFC 9457 problem document.
"""

from __future__ import annotations

import random
import re
from urllib.parse import quote
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, cast

import anyio
import httpx

__all__ = [
    "DEFAULT_ATTEMPTS",
    "DEFAULT_MAX_BACKOFF",
    "DEFAULT_MIN_BACKOFF",
    "MAX_RETRY_AFTER",
    "PROBLEM_TYPE_BASE",
    "Consumption",
    "ConsumeResult",
    "Denial",
    "Hold",
    "HoldResult",
    "CaptureResult",
    "Account",
    "Caps",
    "Membership",
    "Money",
    "Page",
    "PortalSession",
    "WalletMembership",
    "Problem",
    "StipendClient",
    "StipendError",
]

DEFAULT_ATTEMPTS = 4
"""Attempts of a retryable request in all (the Go client's client.DefaultAttempts)."""
DEFAULT_MIN_BACKOFF = 0.05
"""The first backoff window, in seconds; each retry doubles it."""
DEFAULT_MAX_BACKOFF = 2.0
"""The largest backoff window, in seconds."""
MAX_RETRY_AFTER = 10.0
"""The longest Retry-After, in seconds, the client waits out itself."""
PROBLEM_TYPE_BASE = "https://stipend-mcp.github.io/stipend/problems/"
"""The prefix of every problem type Stipend answers; the rest is the problem's kind."""


class Money(TypedDict):
    """An amount in minor units: {"cents": 1500, "currency": "USD"}."""

    cents: int
    currency: str


class Denial(TypedDict):
    """Why one entitlement could not pay (a 402's reasons).

    A refusal by a member's cap in a shared wallet is reason
    "member_limit_reached", with the member (memberId) and which cap (limit:
    "maxPerCall", "maxUnitsPerCall", "spendLimit" or "currency").
    """

    reason: str
    entitlementId: NotRequired[str]
    memberId: NotRequired[str]
    limit: NotRequired[str]


class Problem(TypedDict, total=False):
    """An RFC 9457 problem document as Stipend answers it."""

    type: str
    title: str
    status: int
    detail: str
    reasons: list[Denial]


class Consumption(TypedDict, total=False):
    """One charge of one entitlement."""

    id: str
    agentId: str
    entitlementId: str
    walletId: str
    """The wallet whose entitlement paid, when agentId (a member) spent a wallet's."""
    service: str
    tool: str
    idempotencyKey: str
    cost: Money
    units: int
    balanceAfter: Money
    remainingAfter: int
    holdId: str


class ConsumeResult(TypedDict):
    """The answer to POST /v1/consume."""

    result: Literal["consumed", "replay"]
    consumption: Consumption


class Hold(TypedDict, total=False):
    """A reservation of up to a maximum on an entitlement (POST /v1/authorize)."""

    id: str
    agentId: str
    entitlementId: str
    walletId: str
    """The wallet whose entitlement the hold reserves on, when agentId (a member) holds on a wallet's."""
    entitlementType: str
    status: Literal["held", "captured", "released", "expired"]
    expiresAt: str
    consumptionId: str
    captured: dict[str, Any]


class HoldResult(TypedDict):
    """The answer to POST /v1/authorize and POST /v1/holds/{id}/release."""

    result: str
    hold: Hold


class CaptureResult(TypedDict):
    """The answer to POST /v1/holds/{id}/capture."""

    result: str
    consumption: Consumption


@dataclass
class StipendError(Exception):
    """An error answer of Stipend (status and problem), or no answer at all (status 0)."""

    status: int
    problem: Problem | None
    message: str
    retry_after: float = 0.0
    """The answer's Retry-After, in seconds (0: none)."""

    def __str__(self) -> str:
        return self.message

    @property
    def kind(self) -> str | None:
        """The problem's kind, such as "hold-expired", from its type URI."""
        t = (self.problem or {}).get("type", "")
        return t[len(PROBLEM_TYPE_BASE) :] if t.startswith(PROBLEM_TYPE_BASE) else None

    @property
    def payment_required(self) -> bool:
        """No entitlement of the agent covers the charge (402)."""
        return self.status == 402

    @property
    def key_reused(self) -> bool:
        """The idempotency key was used for a different request (409 or 422)."""
        return self.status in (409, 422) and self.kind not in ("hold-expired", "hold-conflict")

    @property
    def unavailable(self) -> bool:
        """No answer, a 5xx or a 429: the same request may succeed later."""
        return self.status == 0 or self.status >= 500 or self.status == 429

    @property
    def hold_expired(self) -> bool:
        """The hold expired before it was captured."""
        return self.status == 409 and self.kind == "hold-expired"

    @property
    def hold_conflict(self) -> bool:
        """The hold was already ended otherwise (captured with another amount, or released)."""
        return self.status == 409 and self.kind == "hold-conflict"

    @property
    def member_limit(self) -> Denial | None:
        """A 402's refusal by the caller's cap in a shared wallet (reason "member_limit_reached"), if any."""
        if self.status != 402:
            return None
        return next((d for d in (self.problem or {}).get("reasons", []) if d.get("reason") == "member_limit_reached"), None)


_REPEATABLE_POSTS = [
    re.compile(r"^/v1/(consume|check|authorize)$"),
    re.compile(r"^/v1/holds/[^/]+/(capture|release)$"),
    re.compile(r"^/v1/payments/[^/]+/(succeed|fail)$"),
    re.compile(r"^/v1/entitlements/[^/]+/revoke$"),
    re.compile(r"^/v1/webhook-endpoints/[^/]+/disable$"),
]


_UNSET: Any = object()
"""The default of an argument whose None means something (update_member's caps: None removes them)."""


def _repeatable(method: str, path: str, idempotency_key: str | None) -> bool:
    if method != "POST" or idempotency_key:
        return True
    return any(r.match(path) for r in _REPEATABLE_POSTS)


def _retry_after(value: str | None) -> float:
    if value is None or not value.strip().isdigit():
        return 0.0
    return float(value.strip())


class Account(TypedDict):
    """An account: an agent's, or a shared wallet's (kind "wallet")."""

    agentId: str
    kind: NotRequired[Literal["agent", "wallet"]]
    displayName: NotRequired[str]
    metadata: NotRequired[dict[str, str]]
    createdAt: str
    updatedAt: str


class Caps(TypedDict, total=False):
    """A member's caps inside a wallet, across all its entitlements (docs/api.md, "Shared wallets").

    maxPerCall bounds one credits call in its currency, maxUnitsPerCall one
    quota call, spendLimit ({"period": "day", "max": Money} or "maxUnits")
    what the member spends per period; what its open holds reserve counts.
    An answer's spendLimit also carries the member's counters (spent,
    spentUnits, resetAt, anchor).
    """

    maxPerCall: Money
    maxUnitsPerCall: int
    spendLimit: dict[str, Any]


class Membership(TypedDict):
    """An agent's membership in a shared wallet."""

    walletId: str
    memberId: str
    order: Literal["own_first", "wallet_first"]
    caps: NotRequired[Caps]
    createdAt: str
    updatedAt: str


class WalletMembership(Membership):
    """One wallet an agent belongs to, with the wallet's balance and the room the member's spend limit leaves."""

    balance: dict[str, Any]
    capRoom: NotRequired[dict[str, Any]]


class Page(TypedDict):
    """One page of a list: its items, and the cursor of the next page (absent on the last)."""

    items: list[Any]
    nextCursor: NotRequired[str]


class PortalSession(TypedDict):
    """A portal session (docs/portal.md): the end user's short-lived, single-agent credential.

    ``token`` and ``url`` are in the answer that minted it only: the token is
    stored hashed and never shown again.
    """

    id: str
    agentId: str
    createdBy: str
    createdAt: str
    expiresAt: str
    revokedAt: NotRequired[str]
    token: NotRequired[str]
    url: NotRequired[str]


class StipendClient:
    """Calls one Stipend server with one API key; safe for concurrent use within one event loop.

    ``async with StipendClient(url, key) as stipend: ...`` closes its connections
    at the end; so does ``await stipend.aclose()``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 10.0,
        attempts: int = DEFAULT_ATTEMPTS,
        min_backoff: float = DEFAULT_MIN_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        http_client: httpx.AsyncClient | None = None,
        user_agent: str = "stipend-python-client",
    ) -> None:
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"stipend client: base URL {base_url!r} must be an absolute http(s) URL")
        self._base = str(url).rstrip("/")
        self._path = url.path.rstrip("/")
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json, application/problem+json",
            "User-Agent": user_agent,
        }
        self._http = http_client or httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_keepalive_connections=64))
        self._attempts = max(1, attempts)
        self._min_backoff = min_backoff
        self._max_backoff = max(max_backoff, min_backoff)

    async def __aenter__(self) -> StipendClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the client's connections."""
        await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        """Sends one API call (path such as "/v1/consume") and returns the decoded JSON of its 2xx answer.

        It raises StipendError for an error answer, and for no answer (status 0)
        once the retries are spent.
        """
        headers = dict(self._headers)
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        attempts = self._attempts if _repeatable(method, path, idempotency_key) else 1
        last: StipendError | None = None
        for i in range(attempts):
            if i > 0:
                window = min(self._min_backoff * 2 ** (i - 1), self._max_backoff)
                wait = random.uniform(0, window)
                if last is not None:
                    wait = max(wait, last.retry_after)
                await anyio.sleep(wait)
            try:
                resp = await self._http.request(method, self._base + path, json=json, params=params, headers=headers)
            except httpx.TransportError as e:
                last = StipendError(0, None, f"stipend client: {method} {path}: {e!r}")
                continue
            if 200 <= resp.status_code < 300:
                return resp.json() if resp.content else None
            err = _error(method, path, resp)
            if resp.status_code not in (429, 503) or err.retry_after > MAX_RETRY_AFTER:
                raise err
            last = err
        assert last is not None
        raise last

    # The calls a gate makes.

    async def consume(self, body: Mapping[str, Any]) -> ConsumeResult:
        """Charges a call before it runs (POST /v1/consume)."""
        return cast(ConsumeResult, await self.request("POST", "/v1/consume", json=body))

    async def authorize(self, body: Mapping[str, Any]) -> HoldResult:
        """Reserves the most a call may cost (POST /v1/authorize)."""
        return cast(HoldResult, await self.request("POST", "/v1/authorize", json=body))

    async def capture_hold(self, hold_id: str, body: Mapping[str, Any]) -> CaptureResult:
        """Charges a held call what it cost (POST /v1/holds/{id}/capture)."""
        return cast(CaptureResult, await self.request("POST", f"/v1/holds/{_seg(hold_id)}/capture", json=body))

    async def release_hold(self, hold_id: str, agent_id: str) -> HoldResult:
        """Gives a hold back whole (POST /v1/holds/{id}/release)."""
        return cast(HoldResult, await self.request("POST", f"/v1/holds/{_seg(hold_id)}/release", json={"agentId": agent_id}))

    async def get_hold(self, hold_id: str) -> Hold:
        """Reads a hold (GET /v1/holds/{id})."""
        return cast(Hold, await self.request("GET", f"/v1/holds/{_seg(hold_id)}"))

    # Portal sessions (role billing or admin): the end user's page, and the
    # wallet MCP App, read one agent's wallet with them (docs/portal.md).

    async def create_portal_session(self, agent_id: str, idempotency_key: str, *, ttl_seconds: int = 0) -> PortalSession:
        """Mints a portal session for agent_id (POST /v1/portal-sessions).

        ttl_seconds is how long it lasts: 0 for the server's default (an
        hour), else 60 to 86400. The idempotency key makes a retry answer the
        same session.
        """
        body: dict[str, Any] = {"agentId": agent_id}
        if ttl_seconds:
            body["ttlSeconds"] = ttl_seconds
        return cast(PortalSession, await self.request("POST", "/v1/portal-sessions", json=body, idempotency_key=idempotency_key))

    async def get_portal_session(self, session_id: str) -> PortalSession:
        """Reads a portal session, never its token (GET /v1/portal-sessions/{id})."""
        return cast(PortalSession, await self.request("GET", f"/v1/portal-sessions/{_seg(session_id)}"))

    async def revoke_portal_session(self, session_id: str) -> PortalSession:
        """Revokes a portal session: its token is refused from now on (POST /v1/portal-sessions/{id}/revoke)."""
        return cast(PortalSession, await self.request("POST", f"/v1/portal-sessions/{_seg(session_id)}/revoke"))

    # Accounts and shared wallets (docs/api.md, "Shared wallets"): a wallet is
    # an account of kind "wallet" whose entitlements its members spend, each
    # within its caps.

    async def put_account(
        self, agent_id: str, *, kind: Literal["agent", "wallet"] | None = None,
        display_name: str | None = None, metadata: Mapping[str, str] | None = None,
    ) -> Account:
        """Creates or updates an account (PUT /v1/accounts/{id}); kind only when it is made (role billing or admin).

        A kind other than the stored one raises StipendError 409 naming kind.
        """
        body: dict[str, Any] = {}
        if kind is not None:
            body["kind"] = kind
        if display_name is not None:
            body["displayName"] = display_name
        if metadata is not None:
            body["metadata"] = dict(metadata)
        return cast(Account, await self.request("PUT", f"/v1/accounts/{_seg(agent_id)}", json=body))

    async def add_member(
        self, wallet_id: str, member_id: str, idempotency_key: str, *,
        order: Literal["own_first", "wallet_first"] | None = None, caps: Caps | None = None,
    ) -> Membership:
        """Adds an agent to a wallet (POST /v1/wallets/{id}/members, role admin).

        The idempotency key makes a retry answer the same membership. A member
        already there raises StipendError 409; an unknown wallet 404.
        """
        body: dict[str, Any] = {"memberId": member_id}
        if order is not None:
            body["order"] = order
        if caps is not None:
            body["caps"] = dict(caps)
        path = f"/v1/wallets/{_seg(wallet_id)}/members"
        return cast(Membership, await self.request("POST", path, json=body, idempotency_key=idempotency_key))

    async def get_member(self, wallet_id: str, member_id: str) -> Membership:
        """Reads a membership (GET /v1/wallets/{id}/members/{memberId})."""
        return cast(Membership, await self.request("GET", f"/v1/wallets/{_seg(wallet_id)}/members/{_seg(member_id)}"))

    async def update_member(
        self, wallet_id: str, member_id: str, *,
        order: Literal["own_first", "wallet_first"] | None = None, caps: Caps | None = _UNSET,
    ) -> Membership:
        """Changes a member's order or caps (PATCH, role admin); caps replace the old whole, None removes them."""
        body: dict[str, Any] = {}
        if order is not None:
            body["order"] = order
        if caps is not _UNSET:
            body["caps"] = None if caps is None else dict(caps)
        path = f"/v1/wallets/{_seg(wallet_id)}/members/{_seg(member_id)}"
        return cast(Membership, await self.request("PATCH", path, json=body))

    async def remove_member(self, wallet_id: str, member_id: str) -> Membership:
        """Removes a member (DELETE, role admin): its calls stop spending the wallet at once.

        Retried like the other calls, so a 404 means the member is gone,
        whether or not this call removed it.
        """
        path = f"/v1/wallets/{_seg(wallet_id)}/members/{_seg(member_id)}"
        return cast(Membership, await self.request("DELETE", path))

    async def list_members(self, wallet_id: str, *, limit: int = 0, cursor: str = "") -> Page:
        """One page of a wallet's memberships, by member (GET /v1/wallets/{id}/members)."""
        path = f"/v1/wallets/{_seg(wallet_id)}/members"
        return cast(Page, await self.request("GET", path, params=_page(limit, cursor)))

    async def list_wallets(self, agent_id: str, *, limit: int = 0, cursor: str = "") -> Page:
        """One page of the wallets an agent belongs to (items: WalletMembership), by wallet (GET /v1/accounts/{id}/wallets)."""
        path = f"/v1/accounts/{_seg(agent_id)}/wallets"
        return cast(Page, await self.request("GET", path, params=_page(limit, cursor)))


def _page(limit: int, cursor: str) -> dict[str, str | int]:
    params: dict[str, str | int] = {}
    if limit:
        params["limit"] = limit
    if cursor:
        params["cursor"] = cursor
    return params


def _seg(s: str) -> str:
    return quote(s, safe="")


def _error(method: str, path: str, resp: httpx.Response) -> StipendError:
    problem: Problem | None = None
    try:
        body = resp.json()
        if isinstance(body, dict):
            problem = cast(Problem, body)
    except ValueError:
        pass
    detail = (problem or {}).get("detail") or (problem or {}).get("title") or resp.reason_phrase
    return StipendError(
        resp.status_code,
        problem,
        f"stipend client: {method} {path}: {resp.status_code} {detail}",
        _retry_after(resp.headers.get("Retry-After")),
    )
