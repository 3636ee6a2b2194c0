"""An example MCP server whose tools are paid through Stipend: the Python twin of examples/paidtools.

It serves the same tools at the same prices on either Python SDK:

- echo: free;
- forecast: 5 cents or 1 quota unit, charged when it succeeds;
- hourly: a cent an hour (at most 24), or a quota unit per 6 hours; the tool
  reports what a call really cost, and fails (uncharged) outside 1 to 24 hours;
- alert: 10 cents, charged before it runs (its effect cannot be undone).

Configuration is the environment:

    STIPEND_URL              Stipend's address (default http://127.0.0.1:8080)
    STIPEND_HOST_KEY         an API key with the host role (required)
    PAIDTOOLS_SDK            mcp (default: MCPServer of the official SDK) or fastmcp
    PAIDTOOLS_ADDR           host:port to serve streamable HTTP on (port 0: any); absent: stdio
    PAIDTOOLS_STATELESS      true: stateless streamable HTTP (no sessions; any instance serves any request)
    PAIDTOOLS_PURCHASE_URL   where credits are bought, shown in payment_required refusals
    PAIDTOOLS_FAIL_OPEN      true: run calls uncharged while Stipend is unreachable

The agent who pays is named by the client in _meta["io.stipend/agent-id"]
(trust_client_agent_id): fine for a server its own agent's host starts,
not for one facing untrusted clients. Over HTTP it logs "url=http://…/mcp"
on stderr once it listens.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
from typing import Any

from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

import anyio
import uvicorn

from stipend_mcp import Gate, Price, StipendClient, cents_or_units, credits, credits_or_units, free, report_cost

MAX_HOURS = 24


def units_for(hours: int) -> int:
    """Quota units of an hourly call: one per 6 hours, rounded up."""
    return (hours + 5) // 6


PRICES: dict[str, Price] = {
    "echo": free(),
    "forecast": credits_or_units(5, "USD", 1),
    "hourly": credits_or_units(MAX_HOURS, "USD", units_for(MAX_HOURS)),
    "alert": credits(10, "USD").charged_before(),
}


class Forecast(TypedDict):
    city: str
    summary: str
    highC: int
    lowC: int


def seed(s: str) -> int:
    return int.from_bytes(hashlib.sha256(s.encode()).digest()[:4], "big")


def echo(text: str) -> str:
    """Free: sends the text back."""
    return text


def forecast(city: str) -> Forecast:
    """Paid (5 cents or 1 quota unit): tomorrow's weather for a city."""
    if not city:
        raise ValueError("city is required")
    n = seed(city)
    high = n % 30 - 5
    return {"city": city, "summary": ["sunny", "cloudy", "showers", "windy", "snow"][n % 5], "highC": high, "lowC": high - n % 8 - 2}


def hourly(city: str, hours: int) -> str:
    """Paid by the hour (a cent an hour, or a quota unit per 6 hours; at most 24): a city's temperatures."""
    if not city or not 1 <= hours <= MAX_HOURS:
        raise ValueError(f"city is required and hours must be 1 to {MAX_HOURS}")
    # What this call really cost: the gate charges it instead of the price.
    report_cost(cents_or_units(hours, "USD", units_for(hours)))
    n = seed(city)
    return ", ".join(f"+{h}h {n % 30 - 5 + (h % 12) // 2}C" for h in range(1, hours + 1))


def alert(text: str) -> str:
    """Paid before it runs (10 cents): sends an alert, which cannot be taken back."""
    return f"alert sent: {text}"


TOOLS = [echo, forecast, hourly, alert]


def new_gate(env: dict[str, str]) -> Gate:
    key = env.get("STIPEND_HOST_KEY", "")
    if not key:
        raise SystemExit("STIPEND_HOST_KEY is required (an API key with the host role)")
    return Gate(
        stipend=StipendClient(env.get("STIPEND_URL") or "http://127.0.0.1:8080", key),
        service=env.get("PAIDTOOLS_SERVICE") or "weather",
        prices=PRICES,
        trust_client_agent_id=True,
        purchase_url=env.get("PAIDTOOLS_PURCHASE_URL") or None,
        fail_open=env.get("PAIDTOOLS_FAIL_OPEN") == "true",
    )


def new_server(sdk: str, gate: Gate | None) -> Any:
    """The server on sdk ("mcp" or "fastmcp") with every tool, behind gate (None: ungated)."""
    if sdk == "fastmcp":
        from fastmcp import FastMCP

        server: Any = FastMCP("paidtools-py")
        for fn in TOOLS:
            server.tool(fn)
    elif sdk == "mcp":
        from mcp.server.mcpserver import MCPServer

        server = MCPServer("paidtools-py")
        for fn in TOOLS:
            server.tool()(fn)
    else:
        raise SystemExit(f"PAIDTOOLS_SDK: {sdk!r} is not mcp or fastmcp")
    if gate is not None:
        gate.attach(server)
    return server


def http_app(sdk: str, server: Any, stateless: bool) -> Any:
    if sdk == "fastmcp":
        return server.http_app(path="/mcp", stateless_http=stateless)
    return server.streamable_http_app(stateless_http=stateless)


async def serve_http(app: Any, addr: str) -> None:
    host, _, port = addr.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host or "127.0.0.1", int(port)))
    bound_host, bound_port = sock.getsockname()[:2]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    print(f"paidtools-py: listening url=http://{bound_host}:{bound_port}/mcp", file=sys.stderr, flush=True)
    await server.serve(sockets=[sock])


def main() -> None:
    env = dict(os.environ)
    sdk = env.get("PAIDTOOLS_SDK") or "mcp"
    server = new_server(sdk, new_gate(env))
    addr = env.get("PAIDTOOLS_ADDR")
    if not addr:
        if sdk == "fastmcp":
            server.run(show_banner=False)
        else:
            server.run()
        return
    anyio.run(serve_http, http_app(sdk, server, env.get("PAIDTOOLS_STATELESS") == "true"), addr)


if __name__ == "__main__":
    main()
