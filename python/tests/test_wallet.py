"""The wallet as an MCP App (Gate.add_wallet), on MCPServer (mcp 2.x) and FastMCP (fastmcp 4.x), as each SDK's
own Client sees it, against a real stipend serve: the free wallet tool mints the calling agent's portal session,
the ui://stipend/wallet resource is the app's HTML, and a payment_required refusal links the app. The Go gate's
mcpgate/wallet_test.go."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import mcp
import pytest
from mcp.server.mcpserver import MCPServer

from conftest import META_AGENT, REPO, Stipend
from stipend_mcp import (
    META,
    META_PORTAL_SESSION,
    WALLET_MIME_TYPE,
    WALLET_TOOL_NAME,
    WALLET_URI,
    Gate,
    StipendClient,
    credits,
    free,
)

pytestmark = pytest.mark.anyio

SDKS = ["mcp", "fastmcp"]
APP = (REPO / "portal" / "dist" / "wallet.html").read_text(encoding="utf-8")


def new_server(sdk: str) -> Any:
    import fastmcp

    def plain() -> str:
        return "ran"

    if sdk == "mcp":
        server: Any = MCPServer("wallet-test")
        server.tool()(plain)
    else:
        server = fastmcp.FastMCP("wallet-test")
        server.tool(plain)
    return server


@asynccontextmanager
async def wallet_client(stipend: Stipend, sdk: str) -> AsyncIterator[Any]:
    """A Client of sdk connected in process to a server with the gate, a paid tool and the wallet."""
    import fastmcp

    server = new_server(sdk)
    async with StipendClient(stipend.url, stipend.keys["host"]) as host, StipendClient(stipend.url, stipend.keys["billing"]) as billing:
        gate = Gate(stipend=host, service="weather", prices={"echo": free(), "plain": credits(5, "USD")}, trust_client_agent_id=True)
        gate.attach(server)
        gate.add_wallet(server, minter=billing, stipend_url=stipend.url + "/ignored/path")
        async with (mcp.Client(server) if sdk == "mcp" else fastmcp.Client(server)) as c:
            yield c


async def call(c: Any, tool: str, agent: str | None) -> Any:
    meta = {META_AGENT: agent} if agent else None
    if hasattr(c, "call_tool_mcp"):  # fastmcp's Client: the raw result, isError included
        return await c.call_tool_mcp(tool, {}, meta=meta)
    return await c.call_tool(tool, {}, meta=meta)


async def tools(c: Any) -> list[Any]:
    res = await c.list_tools()
    return list(res.tools if hasattr(res, "tools") else res)


async def read(c: Any, uri: str) -> Any:
    res = await c.read_resource(uri)
    return (res.contents if hasattr(res, "contents") else res)[0]


@pytest.mark.parametrize("sdk", SDKS)
async def test_wallet_tool_mints_the_callers_session(stipend: Stipend, sdk: str) -> None:
    agent = f"wallet-{sdk}"
    stipend.fund(agent, 500)
    async with wallet_client(stipend, sdk) as c:
        tool = next((t for t in await tools(c) if t.name == WALLET_TOOL_NAME), None)
        assert tool is not None, "tools/list has no wallet tool"
        assert tool.meta["ui"] == {"resourceUri": WALLET_URI}
        assert tool.meta["ui/resourceUri"] == WALLET_URI
        assert tool.meta[META["price"]] == {"free": True}

        res = await call(c, WALLET_TOOL_NAME, agent)
        assert not res.is_error, res
        ps = (res.meta or {})[META_PORTAL_SESSION]
        assert ps["agentId"] == agent and ps["api"] == stipend.url and ps["token"].startswith("stp_portal_"), ps
        ttl = datetime.fromisoformat(ps["expiresAt"].replace("Z", "+00:00")) - datetime.now(timezone.utc)
        assert timedelta(minutes=14) < ttl <= timedelta(minutes=15, seconds=1), f"expiresAt {ps['expiresAt']}: want the default 15 minutes"
        assert res.structured_content == {"agentId": agent, "expiresAt": ps["expiresAt"]}
        text = res.content[0].text
        assert agent in text and ps["token"] not in text, text

        async with httpx.AsyncClient(base_url=ps["api"], headers={"Authorization": f"Bearer {ps['token']}"}) as h:
            assert (await h.get(f"/v1/accounts/{agent}/balance")).status_code == 200
            assert (await h.get("/v1/accounts/someone-else/balance")).status_code == 401

        res = await call(c, WALLET_TOOL_NAME, None)
        assert res.is_error and META_PORTAL_SESSION not in (res.meta or {}), res


@pytest.mark.parametrize("sdk", SDKS)
async def test_wallet_resource_is_the_app(stipend: Stipend, sdk: str) -> None:
    async with wallet_client(stipend, sdk) as c:
        content = await read(c, WALLET_URI)
    assert content.mime_type == WALLET_MIME_TYPE == "text/html;profile=mcp-app"
    assert content.text == APP, "the resource is not portal/dist/wallet.html"
    assert content.meta == {"ui": {"csp": {"connectDomains": [stipend.url]}, "prefersBorder": True}}


@pytest.mark.parametrize("sdk", SDKS)
async def test_payment_required_refusal_links_the_wallet(stipend: Stipend, sdk: str) -> None:
    async with wallet_client(stipend, sdk) as c:
        res = await call(c, "plain", "wallet-broke")
        assert res.is_error
        assert res.meta[META["refusal"]]["error"] == "payment_required"
        assert res.meta["ui"] == {"resourceUri": WALLET_URI}
        res = await call(c, "plain", None)
        assert res.meta[META["refusal"]]["error"] == "agent_unknown"
        assert "ui" not in res.meta, res.meta


async def test_add_wallet_checks_its_arguments(stipend: Stipend) -> None:
    async with StipendClient(stipend.url, stipend.keys["host"]) as host, StipendClient(stipend.url, stipend.keys["billing"]) as billing:
        gate = Gate(stipend=host, service="weather", prices={"echo": free()})
        server = gate.attach(MCPServer("check"))
        with pytest.raises(ValueError, match="attached"):
            gate.add_wallet(MCPServer("other"), minter=billing, stipend_url=stipend.url)
        with pytest.raises(TypeError, match="minter"):
            gate.add_wallet(server, minter=None, stipend_url=stipend.url)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="stipend_url"):
            gate.add_wallet(server, minter=billing, stipend_url="ftp://x")
        with pytest.raises(ValueError, match="ttl_seconds"):
            gate.add_wallet(server, minter=billing, stipend_url=stipend.url, ttl_seconds=1)
        with pytest.raises(ValueError, match="already has a tool 'echo'"):
            gate.add_wallet(server, minter=billing, stipend_url=stipend.url, tool_name="echo")
        gate.add_wallet(server, minter=billing, stipend_url=stipend.url)
        with pytest.raises(ValueError, match="already has the wallet"):
            gate.add_wallet(server, minter=billing, stipend_url=stipend.url)
        gate.add_wallet(gate.attach(MCPServer("check-2")), minter=billing, stipend_url=stipend.url)  # the same gate on a second server
