"""A paid call that takes two rounds (MCP 2026-07-28 multi-round-trip) under one client key, on MCPServer in
process with the official Client, charging a real stipend serve: the round that asks for input is not charged,
the round that finishes (its requestState makes it a charge of its own) is, once."""

from __future__ import annotations

import mcp
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import InputRequiredResult

from conftest import META_AGENT, META_KEY, Stipend
from stipend_mcp import Gate, StipendClient, credits

pytestmark = pytest.mark.anyio


async def test_the_round_that_finishes_is_charged_once(stipend: Stipend) -> None:
    server = MCPServer("rounds")
    rounds: list[str | None] = []

    @server.tool()
    async def confirm(ctx: Context) -> str | InputRequiredResult:
        rounds.append(ctx.request_state)
        return InputRequiredResult(request_state="round-2") if ctx.request_state is None else "confirmed"

    async with StipendClient(stipend.url, stipend.keys["host"]) as client:
        Gate(stipend=client, service="weather", prices={"confirm": credits(5, "USD")}, trust_client_agent_id=True).attach(server)
        ent = stipend.fund("rounds", 20)
        async with mcp.Client(server) as c:
            res = await c.call_tool("confirm", {}, meta={META_AGENT: "rounds", META_KEY: "mrtr-1"})
    assert rounds == [None, "round-2"]
    assert not res.is_error, res
    assert (res.meta or {})["io.stipend/consumption"]["result"] == "consumed"
    assert stipend.credits(ent) == (15, 0)
    assert len(stipend.consumptions("rounds")) == 1


@pytest.mark.parametrize("sdk", ["mcp", "fastmcp"])
async def test_a_tool_without_a_price_is_refused_as_a_result(stipend: Stipend, sdk: str) -> None:
    import fastmcp

    def secret() -> str:
        return "the secret"

    if sdk == "mcp":
        server: object = MCPServer("unpriced")
        server.tool()(secret)  # type: ignore[attr-defined]
        client: object = mcp.Client(server)
    else:
        server = fastmcp.FastMCP("unpriced")
        server.tool(secret)  # type: ignore[attr-defined]
        client = fastmcp.Client(server)
    async with StipendClient(stipend.url, stipend.keys["host"]) as stipend_client:
        Gate(stipend=stipend_client, service="weather", prices={}, trust_client_agent_id=True).attach(server)
        async with client as c:  # type: ignore[attr-defined]
            res = await c.call_tool("secret", {}, meta={META_AGENT: "a"}, **({"raise_on_error": False} if sdk == "fastmcp" else {}))
    assert res.is_error
    refusal = (res.meta or {})["io.stipend/refusal"]
    assert refusal["error"] == "tool_not_priced"
    assert "the secret" not in res.content[0].text
