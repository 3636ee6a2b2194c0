"""StipendClient retries what the Go client retries, and the Gate checks its configuration when it is built."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stipend_mcp import Gate, Price, StipendClient, StipendError, credits, free

pytestmark = pytest.mark.anyio


class Script:
    """Answers each request with the next (status, headers) of a script, and counts requests by path."""

    def __init__(self, answers: list[tuple[int, dict[str, str]]]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, str, bytes]] = []


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script([])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            script.seen.append((self.command, self.path, body))
            status, headers = script.answers.pop(0) if script.answers else (200, {})
            payload = json.dumps({"result": "consumed", "consumption": {"id": "c1"}} if status == 200
                                 else {"type": "https://stipend-mcp.github.io/stipend/problems/unavailable", "status": status}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if status == 200 else "application/problem+json")
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    httpd.shutdown()
    httpd.server_close()


async def test_consume_is_retried_on_503_with_the_same_body(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(503, {"Retry-After": "0"}), (429, {}), (200, {})]
    async with StipendClient(url, "k", min_backoff=0.001, max_backoff=0.002) as c:
        assert (await c.consume({"idempotencyKey": "k1"}))["result"] == "consumed"
    assert [p for _, p, _ in script.seen] == ["/v1/consume"] * 3
    assert len({b for _, _, b in script.seen}) == 1, "every attempt sends the same body"


async def test_gives_up_after_the_attempts_and_on_a_long_retry_after(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(503, {})] * 4
    async with StipendClient(url, "k", min_backoff=0.001, max_backoff=0.002) as c:
        with pytest.raises(StipendError) as e:
            await c.consume({})
        assert e.value.status == 503 and e.value.unavailable
        assert len(script.seen) == 4
        script.seen.clear()
        script.answers = [(503, {"Retry-After": "11"})]
        with pytest.raises(StipendError):
            await c.consume({})
        assert len(script.seen) == 1, "a Retry-After above 10 s is not waited out"


async def test_a_post_that_is_not_repeatable_is_sent_once(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers = [(503, {})]
    async with StipendClient(url, "k", min_backoff=0.001) as c:
        with pytest.raises(StipendError):
            await c.request("POST", "/v1/payments", json={})
        assert len(script.seen) == 1
        script.answers = [(503, {}), (200, {})]
        await c.request("POST", "/v1/payments", json={}, idempotency_key="pay-1")  # with a key it may be
        assert len(script.seen) == 3


async def test_no_answer_is_retried_then_status_0() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    async with StipendClient(f"http://127.0.0.1:{port}", "k", min_backoff=0.001, max_backoff=0.002) as c:
        with pytest.raises(StipendError) as e:
            await c.authorize({})
    assert e.value.status == 0 and e.value.unavailable


@pytest.mark.parametrize(
    ("prices", "service", "want"),
    [
        ({"t": credits(-1, "USD")}, "weather", "cost cents"),
        ({"t": credits(5, "usd")}, "weather", "ISO 4217"),
        ({"t": Price(units=0)}, "weather", "units must be"),
        ({"t": Price(free=True, units=2)}, "weather", "is free"),
        ({"t\u00e9": free()}, "weather", "tool name"),
        ({"t": free()}, "*", "service"),
    ],
)
def test_gate_checks_its_prices_when_built(prices: dict[str, Price], service: str, want: str) -> None:
    with pytest.raises(ValueError, match=want):
        Gate(stipend=StipendClient("http://127.0.0.1:1", "k"), service=service, prices=prices)


def test_attach_names_the_supported_sdks() -> None:
    gate = Gate(stipend=StipendClient("http://127.0.0.1:1", "k"), service="weather", prices={"t": free()})
    with pytest.raises(TypeError, match="mcp 2.x .* fastmcp 4.x"):
        gate.attach(object())


def test_a_reported_cost_is_capped_at_the_price(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from stipend_mcp import cents, cents_or_units, report_cost
    from stipend_mcp.amount import Meter, current_meter

    meter = Meter("t", credits(10, "USD"), logging.getLogger("test"))
    token = current_meter.set(meter)
    try:
        assert report_cost(cents(15, "USD")) is True
        assert meter.reported == {"cost": {"cents": 10, "currency": "USD"}}
        assert "more than its price" in caplog.text
        assert report_cost(cents_or_units(3, "USD", 1)) is True
        assert meter.reported == {"cost": {"cents": 3, "currency": "USD"}, "units": 1}
        with pytest.raises(ValueError, match="priced in USD"):
            report_cost(cents(3, "EUR"))
    finally:
        current_meter.reset(token)
    assert report_cost(cents(1, "USD")) is False, "outside a call charged on success nothing is reported"


def test_the_agent_comes_from_the_verified_token_first() -> None:
    from mcp.server.auth.provider import AccessToken

    from stipend_mcp import CallInfo, default_agent_id

    claimed = {"io.stipend/agent-id": "claimed"}
    token = AccessToken(token="t", client_id="c", scopes=[], subject="verified")
    assert default_agent_id(CallInfo("t", {}, claimed, token), True) == "verified"
    no_subject = AccessToken(token="t", client_id="c", scopes=[])
    assert default_agent_id(CallInfo("t", {}, claimed, no_subject), True) is None, "a token without a subject names no agent"
    assert default_agent_id(CallInfo("t", {}, claimed, None), True) == "claimed"
    assert default_agent_id(CallInfo("t", {}, claimed, None), False) is None, "_meta is trusted only when the server says so"
