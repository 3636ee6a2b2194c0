"""Stateless streamable HTTP (MCP 2026-07-28): two instances of examples/paidtools-py behind one address
(a round-robin proxy sending each request to the next instance). A call sent again with the client's
idempotency key lands on the other instance and is charged once; without a key, twice. And one call sent
through the Go, TypeScript and Python gates with the same client key is charged once."""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from conftest import META_AGENT, META_KEY, REPO, Stipend, example_command, example_env, http_server, session

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def round_robin(backends: list[str]) -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback HTTP proxy that sends each request to the next backend; yields its URL and posts per backend."""
    turn = itertools.cycle(range(len(backends)))
    posts = [0] * len(backends)
    async with httpx.AsyncClient(timeout=60) as client:

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            body = b""
            while True:
                msg = await receive()
                body += msg.get("body", b"")
                if not msg.get("more_body"):
                    break
            i = next(turn)
            if scope["method"] == "POST":
                posts[i] += 1
            headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k.lower() not in (b"host", b"content-length")]
            r = await client.request(scope["method"], backends[i], headers=headers, content=body)
            out = [(k.encode(), v.encode()) for k, v in r.headers.items() if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")]
            await send({"type": "http.response.start", "status": r.status_code, "headers": out})
            await send({"type": "http.response.body", "body": r.content})

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.serve(sockets=[sock]))
            while not server.started:
                await anyio.sleep(0.01)
            yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", posts
            server.should_exit = True


def meta(agent: str, key: str | None = None) -> dict[str, Any]:
    return {META_AGENT: agent, **({META_KEY: key} if key else {})}


def charge(res: Any) -> dict[str, Any]:
    assert not res.is_error, res
    return (res.meta or {})["io.stipend/consumption"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("sdk", ["mcp", "fastmcp"])
async def test_retry_on_the_other_instance_is_charged_once(stipend: Stipend, sdk: str) -> None:
    env = example_env(stipend.url, stipend.keys["host"], sdk, PAIDTOOLS_STATELESS="true")
    async with AsyncExitStack() as stack:
        urls = [await stack.enter_async_context(http_server(example_command(), env)) for _ in range(2)]
        url, posts = await stack.enter_async_context(round_robin(urls))
        read, write, *_ = await stack.enter_async_context(streamable_http_client(url))
        s = await stack.enter_async_context(ClientSession(read, write))
        await s.initialize()
        agent = f"stateless-{sdk}"
        ent = stipend.fund(agent, 20)
        before = list(posts)
        first = charge(await s.call_tool("forecast", {"city": "Oslo"}, meta=meta(agent, "retry-1")))
        retry = charge(await s.call_tool("forecast", {"city": "Oslo"}, meta=meta(agent, "retry-1")))
        assert posts[0] > before[0] and posts[1] > before[1], f"both instances served: {posts} (before {before})"
        assert first["result"] == "consumed" and retry["result"] == "replay" and retry["consumptionId"] == first["consumptionId"]
        assert stipend.credits(ent) == (15, 0)
        # Without a key a retry cannot be told from a new call: charged again.
        charge(await s.call_tool("forecast", {"city": "Oslo"}, meta=meta(agent)))
        charge(await s.call_tool("forecast", {"city": "Oslo"}, meta=meta(agent)))
        assert stipend.credits(ent) == (5, 0)
        assert len(stipend.consumptions(agent)) == 3


def gates(stipend: Stipend) -> list[tuple[str, list[str], dict[str, str]]]:
    """The example servers of the three gates that are built: Go (PAIDTOOLS_BIN), TypeScript
    (examples/paidtools-ts/dist/main.js, npm run build) and Python."""
    base = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), "STIPEND_URL": stipend.url,
            "STIPEND_HOST_KEY": stipend.keys["host"]}
    out = [("Python", example_command(), {**base, "PAIDTOOLS_SDK": "mcp"})]
    if os.environ.get("PAIDTOOLS_BIN"):
        out.append(("Go", [os.environ["PAIDTOOLS_BIN"]], base))
    ts_main = REPO / "examples" / "paidtools-ts" / "dist" / "main.js"
    if ts_main.exists() and (REPO / "examples" / "paidtools-ts" / "node_modules").exists():
        out.append(("TypeScript", ["node", str(ts_main)], base))
    return out


async def test_one_call_through_every_gate_is_charged_once(stipend: Stipend) -> None:
    found = gates(stipend)
    if os.environ.get("CI") == "true":
        assert len(found) == 3, f"CI=true: the cross-gate test needs the Go and TypeScript examples built; found {[g[0] for g in found]}"
    elif len(found) < 2:
        pytest.skip("needs PAIDTOOLS_BIN (the Go example) or the built TypeScript example beside the Python one")
    agent = "cross-gate"
    ent = stipend.fund(agent, 100)
    results = []
    async with AsyncExitStack() as stack:
        for name, command, env in found:
            s = await stack.enter_async_context(session("stdio", command, env))
            results.append((name, charge(await s.call_tool("forecast", {"city": "Tom & Jerry <3>\u2028é 🌍"}, meta=meta(agent, "cross-1")))))
    assert [r["result"] for _, r in results] == ["consumed"] + ["replay"] * (len(results) - 1), results
    assert len({r["consumptionId"] for _, r in results}) == 1, results
    assert stipend.credits(ent) == (95, 0)
    assert len(stipend.consumptions(agent)) == 1
