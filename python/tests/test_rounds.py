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
