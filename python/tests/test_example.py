"""examples/paidtools-py behind the gate, on MCPServer (mcp 2.x) and FastMCP (fastmcp 4.x), over stdio and
streamable HTTP, driven by the official SDK's ClientSession and charging a real stipend serve: prices in
tools/list, exact charges, replays, the variable cost, failing tools uncharged, every refusal a result."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.client.session import ClientSession

from conftest import META_AGENT, META_KEY, Stipend, example_command, example_env, session

pytestmark = pytest.mark.anyio

SDKS = ["mcp", "fastmcp"]
TRANSPORTS = ["stdio", "http"]


@pytest.fixture(params=[(sdk, t) for sdk in SDKS for t in TRANSPORTS], ids=lambda p: f"{p[0]}-{p[1]}", scope="module")
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
async def s(stipend: Stipend, case: tuple[str, str]) -> AsyncIterator[ClientSession]:
    sdk, transport = case
    async with session(transport, example_command(), example_env(stipend.url, stipend.keys["host"], sdk)) as cs:
        yield cs


def meta(agent: str | None = None, key: str | None = None) -> dict[str, Any] | None:
    m = {}
    if agent:
        m[META_AGENT] = agent
    if key:
        m[META_KEY] = key
    return m or None


def charge(res: Any) -> dict[str, Any]:
    assert not res.is_error, res
    c = (res.meta or {}).get("io.stipend/consumption")
    assert c and c["consumptionId"], res
    return c  # type: ignore[no-any-return]


async def refusal(s: ClientSession, res: Any, tool: str) -> dict[str, Any]:
    """The refusal of res, after checking every client can read it: isError, one text with its message,
    the refusal in _meta, structuredContent only for a tool without an output schema."""
    assert res.is_error, res
    r = (res.meta or {}).get("io.stipend/refusal")
    assert r, res
    assert len(res.content) == 1 and res.content[0].type == "text"
    assert r["message"] in res.content[0].text
    assert r["tool"] == tool
    schema = {t.name: t.output_schema for t in (await s.list_tools()).tools}[tool]
    if schema is not None:
        assert res.structured_content is None
    else:
        assert res.structured_content == r
    return r  # type: ignore[no-any-return]


async def test_tools_list_shows_prices(s: ClientSession) -> None:
    prices = {t.name: (t.meta or {}).get("io.stipend/price") for t in (await s.list_tools()).tools}
    assert prices == {
        "echo": {"free": True},
        "forecast": {"cost": {"cents": 5, "currency": "USD"}, "units": 1, "policy": "on_success"},
        "hourly": {"cost": {"cents": 24, "currency": "USD"}, "units": 4, "policy": "on_success"},
        "alert": {"cost": {"cents": 10, "currency": "USD"}, "units": 1, "policy": "before"},
    }


async def test_paid_call_charged_once_and_replayed(s: ClientSession, stipend: Stipend, case: tuple[str, str]) -> None:
    agent = f"paid-{case[0]}-{case[1]}"
    ent = stipend.fund(agent, 50)
    first = charge(await s.call_tool("forecast", {"city": "Oslo"}, meta=meta(agent, "k-1")))
    assert first["result"] == "consumed" and first["cost"] == {"cents": 5, "currency": "USD"}
    again = charge(await s.call_tool("forecast", {"city": "Oslo"}, meta=meta(agent, "k-1")))
    assert again["result"] == "replay" and again["consumptionId"] == first["consumptionId"]
    assert stipend.credits(ent) == (45, 0)
    # The free tool runs without Stipend.
    res = await s.call_tool("echo", {"text": "hi"})
    assert not res.is_error and "io.stipend/consumption" not in (res.meta or {})


async def test_variable_cost_and_failure(s: ClientSession, stipend: Stipend, case: tuple[str, str]) -> None:
    agent = f"metered-{case[0]}-{case[1]}"
    ent = stipend.fund(agent, 50)
    assert charge(await s.call_tool("hourly", {"city": "Oslo", "hours": 3}, meta=meta(agent)))["cost"] == {"cents": 3, "currency": "USD"}
    failed = await s.call_tool("hourly", {"city": "Oslo", "hours": 0}, meta=meta(agent))
    assert failed.is_error and "io.stipend/refusal" not in (failed.meta or {})
    assert stipend.credits(ent) == (47, 0), "the failed call was charged, or its hold not released"
    # Charged before: the charge stands.
    assert charge(await s.call_tool("alert", {"text": "storm"}, meta=meta(agent)))["cost"] == {"cents": 10, "currency": "USD"}
    assert stipend.credits(ent) == (37, 0)


async def test_refusals_are_results(s: ClientSession, stipend: Stipend, case: tuple[str, str]) -> None:
    r = await refusal(s, await s.call_tool("forecast", {"city": "Oslo"}), "forecast")
    assert r["error"] == "agent_unknown"
    res = await s.call_tool("hourly", {"city": "Oslo", "hours": 2}, meta=meta(f"broke-{case[0]}-{case[1]}"))
    r = await refusal(s, res, "hourly")
    assert r["error"] == "payment_required"
    assert r["purchaseUrl"] == "https://example.com/buy"
    assert r["price"] == {"cost": {"cents": 24, "currency": "USD"}, "units": 4, "policy": "on_success"}
    assert r["reasons"] == [{"reason": "not_found"}]
    assert res.content[0].text == (  # type: ignore[union-attr]
        "payment required: no entitlement of this agent covers tool hourly. Price per call: at most 24 cents USD or 4 units, "
        "charged only if the tool succeeds. Reasons: not_found (this agent has no entitlement for it). Buy credits at https://example.com/buy."
    )
    # A tool without a price is refused; the example prices every tool, so this goes through the gate's own check.
    # A key spent: the first attempt failed (hold released), so the same call under that key is not run again.
    agent = f"spent-{case[0]}-{case[1]}"
    stipend.fund(agent, 50)
    failed = await s.call_tool("hourly", {"city": "Oslo", "hours": 0}, meta=meta(agent, "spent-1"))
    assert failed.is_error and "io.stipend/refusal" not in (failed.meta or {})
    r = await refusal(s, await s.call_tool("hourly", {"city": "Oslo", "hours": 0}, meta=meta(agent, "spent-1")), "hourly")
    assert r["error"] == "idempotency_key_spent"


@pytest.mark.parametrize("sdk", SDKS)
async def test_billing_unavailable_refuses_without_running(sdk: str) -> None:
    env = example_env("http://127.0.0.1:9", "key", sdk)  # nothing listens on the discard port
    async with session("stdio", example_command(), env) as cs:
        res = await cs.call_tool("alert", {"text": "storm"}, meta=meta("agent"))
        r = await refusal(cs, res, "alert")
        assert r["error"] == "billing_unavailable" and r["retryable"] is True
        assert "alert sent" not in res.content[0].text  # type: ignore[union-attr]
