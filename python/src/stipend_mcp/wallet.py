"""The wallet as an MCP App (SEP-1865; docs/portal.md): the Go gate's mcpgate.AddWallet.

Gate.add_wallet registers on a server a free tool (``wallet`` by default)
that mints a portal session of the calling agent and hands it to the app in
the result's _meta, the resource ``ui://stipend/wallet`` (the app's HTML,
shipped in the package), and makes the gate link every payment_required
refusal to the app (``_meta.ui.resourceUri``). The SDK adapters
(mcpserver.py, fastmcp.py) register the tool and resource their SDK's way;
this module holds what they share.
"""

from __future__ import annotations

import contextvars
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import anyio

from .client import StipendClient, StipendError

__all__ = ["META_PORTAL_SESSION", "WALLET_MIME_TYPE", "WALLET_TOOL_NAME", "WALLET_URI"]

WALLET_TOOL_NAME = "wallet"
"""The default name of the wallet tool."""
WALLET_URI = "ui://stipend/wallet"
"""The wallet app's resource."""
WALLET_MIME_TYPE = "text/html;profile=mcp-app"
"""The resource's mimeType: an MCP App's HTML."""
META_PORTAL_SESSION = "io.stipend/portal-session"
"""The wallet tool result's _meta key holding {api, agentId, token, expiresAt}, what the app reads the wallet with."""

MIN_TTL_SECONDS = 60
MAX_TTL_SECONDS = 86_400
DEFAULT_TTL_SECONDS = 15 * 60

TITLE = "Wallet"
DESCRIPTION = "Show the user the wallet that pays for this server's tools: balance, usage, receipts, and a top-up button. Free."
TOOL_META = {"ui": {"resourceUri": WALLET_URI}, "ui/resourceUri": WALLET_URI}
REFUSAL_LINK = {"resourceUri": WALLET_URI}

calling_agent: contextvars.ContextVar[str | None] = contextvars.ContextVar("stipend_wallet_agent", default=None)
"""The agent of the wallet tool's call, as the gate resolved it before running the tool (GatedCall.handle)."""


@dataclass(frozen=True)
class Wallet:
    """Gate.add_wallet's checked configuration."""

    minter: StipendClient
    origin: str
    ttl_seconds: int
    tool: str

    def resource_meta(self) -> dict[str, Any]:
        """The resource's _meta: the app may connect to Stipend only, and wants a border."""
        return {"ui": {"csp": {"connectDomains": [self.origin]}, "prefersBorder": True}}


def wallet_of(minter: StipendClient, stipend_url: str, ttl_seconds: int, tool_name: str) -> Wallet:
    """Checks add_wallet's arguments; raises TypeError or ValueError saying what is wrong."""
    if not isinstance(minter, StipendClient):
        raise TypeError("stipend gate: add_wallet's minter must be a StipendClient with a billing key")
    u = urlsplit(stipend_url if isinstance(stipend_url, str) else "")
    if u.scheme not in ("http", "https") or not u.netloc:
        raise ValueError(f"stipend gate: add_wallet's stipend_url {stipend_url!r}: want an origin such as https://billing.example.com")
    if not isinstance(ttl_seconds, int) or not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
        raise ValueError(f"stipend gate: add_wallet's ttl_seconds {ttl_seconds!r}: want whole seconds from {MIN_TTL_SECONDS} to {MAX_TTL_SECONDS}")
    return Wallet(minter=minter, origin=f"{u.scheme}://{u.netloc}", ttl_seconds=ttl_seconds, tool=tool_name or WALLET_TOOL_NAME)


def wallet_html() -> str:
    """The wallet app's HTML (stipend_mcp/wallet.html, copied from portal/dist/wallet.html when the package is built)."""
    return resources.files("stipend_mcp").joinpath("wallet.html").read_text(encoding="utf-8")


async def show_wallet(w: Wallet, timeout: float, log: Any) -> dict[str, Any]:
    """The wallet tool's result, as the wire's CallToolResult dict: a portal session of the calling agent for the
    app (in _meta, which hosts do not show the model), and a text telling the model what it did."""
    agent = calling_agent.get()
    if not agent:
        return wallet_error("the wallet cannot be shown: the call does not say which agent it is for")
    try:
        with anyio.fail_after(timeout):
            ps = await w.minter.create_portal_session(agent, str(uuid.uuid4()), ttl_seconds=w.ttl_seconds)
    except (StipendError, TimeoutError) as e:
        log.error("stipend gate: minting the wallet's portal session failed (agent %s): %s", agent, e)
        return wallet_error("the wallet is unavailable right now; try again shortly")
    expires = ps["expiresAt"]
    return {
        "content": [{"type": "text", "text": f"Showing the wallet of agent {agent} (balance, usage, receipts, top-up). "
                                             f"Its session ends at {rfc3339(expires)}."}],
        "structuredContent": {"agentId": agent, "expiresAt": expires},
        "_meta": {META_PORTAL_SESSION: {"api": w.origin, "agentId": agent, "token": ps.get("token", ""), "expiresAt": expires}},
    }


def rfc3339(t: str) -> str:
    """t in whole seconds, UTC, as the Go gate says it."""
    try:
        d = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        return t
    return d.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def app_reader() -> Callable[[], str]:
    """A resource function answering the app's HTML, read now (a missing file fails add_wallet, not a read)."""
    html = wallet_html()

    def wallet_app() -> str:
        return html

    wallet_app.__annotations__ = {"return": str}  # the SDKs read it; the module's annotations are strings
    return wallet_app


def wallet_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}
