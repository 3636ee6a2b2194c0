"""The Gate: charges the tool calls of an MCP server to Stipend.

The Python twin of the Go gate (package mcpgate) and the TypeScript gate,
decision for decision: prices checked when the gate is built and shown in
tools/list _meta["io.stipend/price"]; policies "on_success" (authorize a hold
of the price, run the tool, capture what it reported or the price when it
succeeds, release when it fails, raises or is cancelled) and "before"
(consume, then run); refusals as isError results with a text, the refusal in
_meta["io.stipend/refusal"] and as structuredContent only for a tool without
an output schema; and the same idempotency keys, so one call retried through
any of the gates is charged once.

The SDK-specific parts live in mcpserver.py (the official SDK's MCPServer)
and fastmcp.py (FastMCP 4.x); this module holds what they share.
"""

from __future__ import annotations

import logging
import secrets
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import anyio

from .amount import Meter, current_meter
from .client import Consumption, Hold, StipendClient, StipendError
from .key import idempotency_key
from .price import Policy, Price, free, valid_name
from .refusal import Refusal, RefusalKind
from .wallet import REFUSAL_LINK, DEFAULT_TTL_SECONDS, Wallet, calling_agent, wallet_of

__all__ = ["META", "SUPPORTED_SDKS", "CallInfo", "Gate", "default_agent_id"]

META = {
    "idempotency_key": "io.stipend/idempotency-key",
    "agent_id": "io.stipend/agent-id",
    "consumption": "io.stipend/consumption",
    "unbilled": "io.stipend/unbilled",
    "refusal": "io.stipend/refusal",
    "price": "io.stipend/price",
}
"""The _meta keys the gate reads (idempotency_key, agent_id on requests) and writes."""

SUPPORTED_SDKS = "mcp 2.x (mcp.server.mcpserver.MCPServer) or fastmcp 4.x (fastmcp.FastMCP)"

DEFAULT_TIMEOUT = 5.0
"""Bounds each call to Stipend, retries included, in seconds (the Go gate's DefaultTimeout)."""
DEFAULT_HOLD_TTL_SECONDS = 300
"""The hold TTL of a call charged on success (entitlement.DefaultHoldTTL)."""
MAX_HOLD_TTL_SECONDS = 86_400
"""The longest hold TTL Stipend takes."""


@dataclass(frozen=True)
class CallInfo:
    """A tools/call as the gate sees it, for Gate(agent_id=...)."""

    tool: str
    arguments: Mapping[str, Any] | None
    meta: Mapping[str, Any] | None
    access_token: Any | None
    """The verified access token of the request (mcp.server.auth.provider.AccessToken), if the server checks tokens."""


def default_agent_id(call: CallInfo, trust_client_agent_id: bool) -> str | None:
    """Names the agent to charge, as the Go gate's DefaultAgentID does.

    With a verified access token, its subject (the resource owner) and nothing
    else; otherwise, only if trust_client_agent_id, the request's
    _meta["io.stipend/agent-id"]. None means the call names no agent, and the
    gate refuses it (agent_unknown).
    """
    if call.access_token is not None:
        subject = getattr(call.access_token, "subject", None)
        return subject if isinstance(subject, str) and subject else None
    if not trust_client_agent_id:
        return None
    agent = (call.meta or {}).get(META["agent_id"])
    return agent if isinstance(agent, str) and agent else None


class Gate:
    """Charges the tool calls of an MCP server to Stipend.

    Build it once and attach it to the server before or after registering tools::

        gate = Gate(stipend=StipendClient(url, host_key), service="weather",
                    prices={"echo": free(), "forecast": credits_or_units(5, "USD", 1)},
                    trust_client_agent_id=True)
        gate.attach(server)  # an MCPServer of mcp 2.x, or a FastMCP of fastmcp 4.x

    A tool missing from prices is refused (tool_not_priced), so a forgotten
    price never gives a tool away. The constructor raises ValueError saying
    what is wrong with the configuration.
    """

    def __init__(
        self,
        *,
        stipend: StipendClient,
        service: str,
        prices: Mapping[str, Price],
        policy: Policy = "on_success",
        agent_id: Callable[[CallInfo], str | None | Awaitable[str | None]] | None = None,
        trust_client_agent_id: bool = False,
        fail_open: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        hold_ttl_seconds: int = DEFAULT_HOLD_TTL_SECONDS,
        purchase_url: str | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        if not isinstance(stipend, StipendClient):
            raise TypeError("stipend gate: stipend must be a StipendClient")
        if not valid_name(service) or service == "*":
            raise ValueError(f'stipend gate: service {service!r} must be 1-200 printable ASCII characters and not "*"')
        if policy not in ("on_success", "before"):
            raise ValueError(f'stipend gate: policy must be "on_success" or "before"; got {policy!r}')
        checked: dict[str, Price] = {}
        for tool, price in prices.items():
            if not valid_name(tool):
                raise ValueError(f"stipend gate: tool name {tool!r} in prices must be 1-200 printable ASCII characters (Stipend's limit)")
            if not isinstance(price, Price):
                raise ValueError(f"stipend gate: price of tool {tool!r} must be a Price, such as free(), credits(5, 'USD') or units(2)")
            problem = price.problem()
            if problem is not None:
                raise ValueError(f"stipend gate: price of tool {tool!r} {problem}")
            checked[tool] = price
        if not timeout > 0:
            raise ValueError(f"stipend gate: timeout must be positive; got {timeout!r}")
        if not isinstance(hold_ttl_seconds, int) or not 1 <= hold_ttl_seconds <= MAX_HOLD_TTL_SECONDS:
            raise ValueError(f"stipend gate: hold_ttl_seconds must be whole seconds from 1 to {MAX_HOLD_TTL_SECONDS}; got {hold_ttl_seconds!r}")
        self.stipend = stipend
        self.service = service
        self.prices: Mapping[str, Price] = checked
        self.policy: Policy = policy
        self._agent_id = agent_id or (lambda call: default_agent_id(call, trust_client_agent_id))
        self.fail_open = fail_open
        self.timeout = timeout
        self.hold_ttl_seconds = hold_ttl_seconds
        self.purchase_url = purchase_url or None
        self.log = logger or logging.getLogger("stipend_mcp.gate")
        self.wallet: Wallet | None = None
        self._attached: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # server: its SDK adapter
        self._with_wallet: weakref.WeakSet[Any] = weakref.WeakSet()

    def terms(self, tool: str) -> dict[str, Any] | None:
        """How tool is charged, as tools/list shows it; None for a tool not in the price table."""
        price = self.prices.get(tool)
        return None if price is None else price.terms(self.policy)

    def attach(self, server: Any) -> Any:
        """Puts the gate in front of server's tools and returns server.

        server is an MCPServer of mcp 2.x or a FastMCP of fastmcp 4.x; anything
        else raises TypeError naming the supported SDKs. From then on every
        tools/call is charged by its tool's price and policy and every
        tools/list entry shows its price under _meta["io.stipend/price"].
        """
        from . import fastmcp, mcpserver  # the SDK adapters import their SDK only when used

        for adapter in (mcpserver, fastmcp):
            if adapter.accepts(server):
                adapter.attach(self, server)
                self._attached[server] = adapter
                return server
        raise TypeError(f"stipend gate: attach takes an MCPServer or FastMCP server of {SUPPORTED_SDKS}; got {type(server).__name__}")

    def add_wallet(self, server: Any, *, minter: StipendClient, stipend_url: str,
                   ttl_seconds: int = DEFAULT_TTL_SECONDS, tool_name: str = "") -> None:
        """Adds the wallet as an MCP App (SEP-1865; docs/portal.md) to server, which this gate is attached to.

        It registers a free tool (tool_name, "wallet" by default, added to the
        price table) whose result carries a portal session of the calling
        agent, minted by minter (a StipendClient with a billing key; the app
        gets only the session) for ttl_seconds (60 to 86400; 15 minutes by
        default); the resource ui://stipend/wallet, the app, allowed to connect
        to stipend_url's origin; and links every payment_required refusal of
        the gate to the app (_meta.ui.resourceUri). Call it once, before
        serving. It raises when an argument is wrong, the price table already
        has another tool of that name, or server already has the wallet; a gate
        attached to several servers may add it to each. The Go gate's AddWallet.
        """
        adapter = self._attached.get(server)
        if adapter is None:
            raise ValueError("stipend gate: add_wallet takes a server the gate is attached to (gate.attach(server) first)")
        if server in self._with_wallet:
            raise ValueError("stipend gate: this server already has the wallet")
        w = wallet_of(minter, stipend_url, ttl_seconds, tool_name)
        # A gate attached to several servers adds the wallet to each under one name.
        if w.tool in self.prices and (self.wallet is None or self.wallet.tool != w.tool):
            raise ValueError(f"stipend gate: the price table already has a tool {w.tool!r}")
        self.prices = {**self.prices, w.tool: free()}
        self.wallet = w
        adapter.add_wallet(self, server, w)
        self._with_wallet.add(server)

    async def agent_of(self, call: CallInfo) -> str | None:
        """The agent to charge for call (None: unknown)."""
        try:
            agent = self._agent_id(call)
            if isinstance(agent, Awaitable):
                agent = await agent
        except Exception:
            self.log.warning("stipend gate: the agent_id function failed (tool %s)", call.tool, exc_info=True)
            return None
        return agent if isinstance(agent, str) and agent else None


R = TypeVar("R")


class Results(Protocol[R]):
    """How an SDK adapter reads and makes tool results (of its SDK's type R)."""

    def succeeded(self, result: R) -> bool:
        """Whether the tool did its work: not isError, not asking for input."""

    def with_meta(self, result: R, key: str, value: Any) -> R:
        """result with _meta[key] = value."""

    def refusal(self, refusal: Refusal, structured: bool) -> R:
        """The result of a refusal: isError, its text, the refusal in _meta (and as structuredContent if structured)."""


@dataclass
class Call(Generic[R]):
    """One tools/call, as an SDK adapter hands it to the gate."""

    tool: str
    arguments: Mapping[str, Any] | None
    meta: Mapping[str, Any] | None
    request_state: str | None
    access_token: Any | None
    session: str
    """The session id of the request ("" without one)."""
    request: str
    """The request stamp (key.request_stamp) of a call without a client key."""
    run: Callable[[], Awaitable[R]]
    declares_output_schema: Callable[[], Awaitable[bool]]
    results: Results[R]


class GatedCall(Generic[R]):
    """One tools/call passing the gate: the Go gate's gatedCall (middleware.go, before.go, onsuccess.go)."""

    def __init__(self, gate: Gate, call: Call[R]) -> None:
        self.g = gate
        self.c = call
        self.price: Price | None = None
        self.agent = ""

    async def handle(self) -> R:
        """Charges the call by its tool's policy and answers it."""
        refusal = await self.admit()
        if refusal is not None:
            return await self.refuse(refusal)
        price = self.price
        assert price is not None
        if price.free:
            w = self.g.wallet
            if w is None or self.c.tool != w.tool:
                return await self.c.run()
            # The wallet tool shows the calling agent's wallet: it reads the agent the gate resolves.
            c = self.c
            token = calling_agent.set(await self.g.agent_of(CallInfo(c.tool, c.arguments, c.meta, c.access_token)))
            try:
                return await c.run()
            finally:
                calling_agent.reset(token)
        if (price.policy or self.g.policy) == "before":
            return await self.charge_before(price)
        return await self.charge_on_success(price)

    async def admit(self) -> Refusal | None:
        """Looks up the price and, for a priced tool, the agent; the refusal of a call that cannot be charged at all."""
        c = self.c
        self.price = self.g.prices.get(c.tool)
        if self.price is None:
            return self.plain("tool_not_priced", f"tool {c.tool} has no price configured, so it is not available")
        if self.price.free:
            return None
        agent = await self.g.agent_of(CallInfo(c.tool, c.arguments, c.meta, c.access_token))
        if agent is None:
            return self.refusal("agent_unknown", f"tool {c.tool} is paid, and the call does not say which agent pays for it")
        self.agent = agent
        return None

    def key(self) -> str:
        """The idempotency key of the call (key.py)."""
        c = self.c
        client_key = (c.meta or {}).get(META["idempotency_key"])
        if isinstance(client_key, str) and client_key:
            return idempotency_key(self.g.service, c.tool, c.arguments, client_key=client_key, request_state=c.request_state)
        return idempotency_key(self.g.service, c.tool, c.arguments, session=c.session, request=c.request, request_state=c.request_state)

    async def ask(self, f: Callable[[], Awaitable[Any]], *, shielded: bool = False) -> Any:
        """One call to Stipend, bounded by the gate's timeout (a timeout is no answer: StipendError status 0).

        A shielded call (a capture, a release, a hold read) outlives the
        request's cancellation: a cancelled call still releases its hold.
        """
        try:
            with anyio.CancelScope(shield=shielded), anyio.fail_after(self.g.timeout):
                return await f()
        except TimeoutError as e:
            raise StipendError(0, None, f"stipend gate: Stipend did not answer within {self.g.timeout}s") from e

    async def charge_before(self, price: Price) -> R:
        """Policy "before": consume, then run; the charge stands whatever the tool does."""
        g, c = self.g, self.c
        body = self.body(price, "cost", "units")
        try:
            answer = await self.ask(lambda: g.stipend.consume(body))
        except StipendError as e:
            return await self.refused(e)
        consumption = answer["consumption"]
        try:
            out = await c.run()
        except BaseException:
            if answer["result"] == "consumed":
                g.log.warning("stipend gate: tool failed after it was charged (tool %s, consumption %s)", c.tool, consumption.get("id"))
            raise
        if not c.results.succeeded(out) and answer["result"] == "consumed":
            g.log.warning("stipend gate: tool failed after it was charged (tool %s, consumption %s)", c.tool, consumption.get("id"))
        return c.results.with_meta(out, META["consumption"], charge_of(consumption, answer["result"]))

    async def charge_on_success(self, price: Price) -> R:
        """Policy "on_success": authorize a hold of the price, run, capture on success, release otherwise.

        An authorize that replays finds the hold as it is now: captured (the
        call was charged: run again, charge nothing more), released or expired
        (refused: idempotency_key_spent), or open (another attempt holds it:
        run and, on success, capture; never release a hold this attempt does
        not own).
        """
        g, c = self.g, self.c
        body = self.body(price, "maxCost", "maxUnits", ttlSeconds=g.hold_ttl_seconds)
        try:
            answer = await self.ask(lambda: g.stipend.authorize(body))
        except StipendError as e:
            return await self.refused(e)
        hold = answer["hold"]
        owner = answer["result"] == "held"
        meter = Meter(c.tool, price, g.log)
        if not owner:
            if hold.get("status") == "captured":
                res = await self.run_metered(meter)
                return c.results.with_meta(res, META["consumption"], replay_of(hold))
            if hold.get("status") in ("released", "expired"):
                return await self.refuse(self.spent(hold))
        try:
            res = await self.run_metered(meter)
        except BaseException:  # an exception or a cancellation: nothing was done that can be charged
            if owner:
                await self.release(hold)
            raise
        if not c.results.succeeded(res):
            if owner:
                await self.release(hold)
            return res
        return await self.capture(hold, meter, res)

    async def run_metered(self, meter: Meter) -> R:
        """Runs the tool with meter in place for report_cost."""
        token = current_meter.set(meter)
        try:
            return await self.c.run()
        finally:
            current_meter.reset(token)

    async def capture(self, hold: Hold, meter: Meter, res: R) -> R:
        """Charges the hold what the tool reported (else the price) and answers res with the charge."""
        g, c = self.g, self.c
        body: dict[str, Any] = {"agentId": self.agent, **meter.reported}
        try:
            out = await self.ask(lambda: g.stipend.capture_hold(hold["id"], body), shielded=True)
        except StipendError as e:
            if e.hold_expired:
                g.log.error(
                    "stipend gate: the tool ran past its hold's expiry, so the call cannot be charged; its result is withheld "
                    "(raise hold_ttl_seconds above the tool's longest run) (tool %s, agent %s, hold %s)",
                    c.tool, self.agent, hold["id"],
                )
                return await self.refuse(self.refusal(
                    "hold_expired", "the tool ran longer than its charge could be held, so the call was not charged and its result was withheld"))
            if e.hold_conflict:
                return await self.ended_elsewhere(hold, res)
            g.log.error("stipend gate: capturing the hold failed; it expires uncharged, so the agent is not charged for this call "
                        "(tool %s, agent %s, hold %s): %s", c.tool, self.agent, hold["id"], e)
            return c.results.with_meta(res, META["unbilled"], True)
        result = "consumed" if out["result"] == "captured" else "replay"  # replay: another attempt captured it
        return c.results.with_meta(res, META["consumption"], charge_of(out["consumption"], result))

    async def ended_elsewhere(self, hold: Hold, res: R) -> R:
        """Answers a run whose capture found the hold ended by another attempt: charged, or not, as the hold now says."""
        g, c = self.g, self.c
        try:
            now = await self.ask(lambda: g.stipend.get_hold(hold["id"]), shielded=True)
        except StipendError as e:
            g.log.error("stipend gate: another attempt ended the hold, and reading it failed; answering the result unbilled "
                        "(tool %s, agent %s, hold %s): %s", c.tool, self.agent, hold["id"], e)
            return c.results.with_meta(res, META["unbilled"], True)
        if now.get("status") == "captured":
            return c.results.with_meta(res, META["consumption"], replay_of(now))
        return await self.refuse(self.spent(now))

    async def release(self, hold: Hold) -> None:
        """Gives the hold back whole; a release that fails leaves it to expire, which charges nothing either."""
        g = self.g
        try:
            await self.ask(lambda: g.stipend.release_hold(hold["id"], self.agent), shielded=True)
        except StipendError as e:
            if e.hold_conflict:
                g.log.info("stipend gate: the call failed, and another attempt of it had already been charged (tool %s, hold %s)", self.c.tool, hold["id"])
                return
            g.log.error("stipend gate: releasing the hold of a failed call failed; it expires uncharged (tool %s, hold %s): %s", self.c.tool, hold["id"], e)

    def body(self, price: Price, cost: str, units: str, **more: Any) -> dict[str, Any]:
        """The body of a consume or an authorize: the call, more, and the price under the names the route gives it."""
        body: dict[str, Any] = {"agentId": self.agent, "service": self.g.service, "tool": self.c.tool, "idempotencyKey": self.key(), **more}
        if price.cost is not None:
            body[cost] = price.cost
        if price.units is not None:
            body[units] = price.units
        return body

    async def refused(self, e: StipendError) -> R:
        """Answers a failed consume or authorize: its refusal, or the call run uncharged when the gate fails open."""
        refusal = self.deny(e)
        return await (self.refuse(refusal) if refusal else self.run_unbilled())

    def deny(self, e: StipendError) -> Refusal | None:
        """The refusal for a failed consume or authorize; None when the gate fails open and Stipend could not be reached."""
        g, tool = self.g, self.c.tool
        if e.payment_required:
            r = self.refusal("payment_required", f"payment required: no entitlement of this agent covers tool {tool}")
            if g.purchase_url:
                r["purchaseUrl"] = g.purchase_url
            reasons = (e.problem or {}).get("reasons")
            if reasons:
                r["reasons"] = reasons
            return r
        if e.key_reused:
            return self.plain("idempotency_key_conflict", "the idempotency key of this call was already used for a different call; send a new key")
        if e.unavailable:
            if g.fail_open:
                g.log.warning("stipend gate: Stipend unavailable; running the call uncharged (fail open) (tool %s, agent %s): %s", tool, self.agent, e)
                return None
            g.log.error("stipend gate: Stipend unavailable; refusing the call (fail closed) (tool %s): %s", tool, e)
            r = self.plain("billing_unavailable", "billing is temporarily unavailable; try the call again shortly")
            r["retryable"] = True
            return r
        # A 400, 401 or 403: the gate or its key is misconfigured. Say little to the caller and everything to the operator.
        g.log.error("stipend gate: Stipend refused the charge (tool %s, agent %s): %s", tool, self.agent, e)
        return self.plain("billing_error", "the call could not be charged because of a billing configuration error")

    async def run_unbilled(self) -> R:
        """Runs the call uncharged (fail open) and marks its result so."""
        return self.c.results.with_meta(await self.c.run(), META["unbilled"], True)

    def spent(self, hold: Hold) -> Refusal:
        """The refusal of a call whose key's hold ended without a charge."""
        why = ("it expired before the call finished" if hold.get("status") == "expired"
               else "it was released: the tool failed or the call was cancelled")
        return self.refusal(
            "idempotency_key_spent",
            f"an earlier attempt of this call under the same idempotency key was not charged ({why}), so it is not run again "
            "under that key; send the call again with a new idempotency key",
        )

    def refusal(self, kind: RefusalKind, message: str) -> Refusal:
        """A refusal of kind with message, showing the tool's price."""
        r = self.plain(kind, message)
        if self.price is not None:
            r["price"] = self.price.terms(self.g.policy)
        return r

    def plain(self, kind: RefusalKind, message: str) -> Refusal:
        """A refusal of kind with message and no price."""
        return {"error": kind, "message": message, "service": self.g.service, "tool": self.c.tool}

    async def refuse(self, r: Refusal) -> R:
        """Answers r instead of a result of the tool."""
        res = self.c.results.refusal(r, not await self.c.declares_output_schema())
        if self.g.wallet is not None and r["error"] == "payment_required":
            res = self.c.results.with_meta(res, "ui", REFUSAL_LINK)  # a host that renders MCP Apps may show the wallet here
        return res


def charge_of(c: Consumption, result: str) -> dict[str, Any]:
    """What the gate puts in a charged call's result under _meta["io.stipend/consumption"]."""
    charge: dict[str, Any] = {"consumptionId": c.get("id", ""), "result": result, "entitlementId": c.get("entitlementId", "")}
    cost = c.get("cost")
    if cost and (cost.get("cents") or cost.get("currency")):
        charge["cost"] = cost
    if c.get("units"):
        charge["units"] = c["units"]
    if c.get("balanceAfter"):
        charge["balanceAfter"] = c["balanceAfter"]
    if c.get("remainingAfter") is not None:
        charge["remainingAfter"] = c["remainingAfter"]
    if c.get("holdId"):
        charge["holdId"] = c["holdId"]
    return charge


def replay_of(hold: Hold) -> dict[str, Any]:
    """The charge of a captured hold, charged earlier."""
    charge: dict[str, Any] = {"consumptionId": hold.get("consumptionId", ""), "result": "replay", "holdId": hold.get("id", ""),
                              "entitlementId": hold.get("entitlementId", "")}
    captured = hold.get("captured") or {}
    if captured.get("units"):
        charge["units"] = captured["units"]
    if hold.get("entitlementType") == "credits" and captured.get("cost"):
        charge["cost"] = captured["cost"]
    return charge


def random_nonce() -> str:
    """A nonce for a connection or a stateless request."""
    return secrets.token_hex(16)
