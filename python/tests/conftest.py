"""The real things the tests run against: stipend serve (memory store) and the example server.

STIPEND_BIN names a built stipend binary (scripts/test-python sets it); without
it the suite builds one with go build. Each test module gets its own Stipend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "paidtools-py" / "server.py"
META_AGENT = "io.stipend/agent-id"
META_KEY = "io.stipend/idempotency-key"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def stipend_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    if os.environ.get("STIPEND_BIN"):
        return os.environ["STIPEND_BIN"]
    out = tmp_path_factory.mktemp("bin") / "stipend"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/stipend"], cwd=REPO, check=True)
    return str(out)


@dataclass
class Stipend:
    """A running stipend serve and its development keys."""

    url: str
    keys: dict[str, str]
    proc: subprocess.Popen[bytes]
    log: list[str] = field(default_factory=list)

    def billing(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.keys['billing']}"}, timeout=30)

    def fund(self, agent: str, cents: int, service: str = "weather") -> str:
        """Gives agent cents of USD credits for service (a manual payment, completed); returns the entitlement id."""
        with self.billing() as c:
            p = c.post(
                "/v1/payments",
                json={"agentId": agent, "amount": {"cents": cents, "currency": "USD"}, "provider": "manual",
                      "grant": {"type": "credits", "scope": {"service": service}}},
                headers={"Idempotency-Key": f"fund-{agent}-{service}-{cents}"},
            )
            p.raise_for_status()
            done = c.post(f"/v1/payments/{p.json()['id']}/succeed")
            done.raise_for_status()
            return str(done.json()["entitlements"][0]["id"])

    def credits(self, entitlement_id: str) -> tuple[int, int]:
        """The entitlement's balance and held cents."""
        with self.billing() as c:
            r = c.get(f"/v1/entitlements/{entitlement_id}")
            r.raise_for_status()
            cr = r.json()["credits"]
            return cr["balance"]["cents"], (cr.get("held") or {}).get("cents", 0)

    def consumptions(self, agent: str) -> list[dict[str, Any]]:
        with self.billing() as c:
            r = c.get(f"/v1/accounts/{agent}/consumptions", params={"limit": 100})
            r.raise_for_status()
            return list(r.json()["items"])


def start_stipend(binary: str) -> Stipend:
    keys_file = Path(tempfile.mkdtemp(prefix="stipend-py-")) / "keys.json"
    proc = subprocess.Popen(
        [binary, "serve", "--addr", "127.0.0.1:0", "--dev-keys-out", str(keys_file)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "")},
    )
    assert proc.stderr is not None
    log: list[str] = []
    deadline = time.monotonic() + 60
    addr = None
    while addr is None:
        line = proc.stderr.readline().decode()
        if not line:
            raise RuntimeError("stipend serve exited before listening:\n" + "".join(log))
        log.append(line)
        if line.startswith("{"):
            rec = json.loads(line)
            if rec.get("message") == "listening":
                addr = rec["addr"]
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("stipend serve did not listen within 60 s:\n" + "".join(log))
    threading.Thread(target=lambda: [log.append(ln.decode()) for ln in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    keys = json.loads(keys_file.read_text())
    return Stipend(f"http://{addr}", keys, proc, log)


@pytest.fixture(scope="module")
def stipend(stipend_bin: str) -> Iterator[Stipend]:
    s = start_stipend(stipend_bin)
    yield s
    s.proc.kill()
    s.proc.wait()


def example_env(stipend_url: str, host_key: str, sdk: str, **more: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), "STIPEND_URL": stipend_url,
           "STIPEND_HOST_KEY": host_key, "PAIDTOOLS_SDK": sdk, "PAIDTOOLS_PURCHASE_URL": "https://example.com/buy"}
    env.update(more)
    return env


@asynccontextmanager
async def http_server(command: list[str], env: dict[str, str]) -> AsyncIterator[str]:
    """Starts a server program serving streamable HTTP (PAIDTOOLS_ADDR=127.0.0.1:0); yields its URL."""
    proc = subprocess.Popen(command, env={**env, "PAIDTOOLS_ADDR": "127.0.0.1:0"}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    try:
        lines: list[str] = []
        url = None
        while url is None:
            line = proc.stderr.readline().decode()
            if not line:
                raise RuntimeError(f"{command} exited before listening:\n" + "".join(lines))
            lines.append(line)
            if "url=" in line:
                url = line.split("url=", 1)[1].split()[0]
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
        yield url
    finally:
        proc.kill()
        proc.wait()


@asynccontextmanager
async def session(transport: str, command: list[str], env: dict[str, str]) -> AsyncIterator[ClientSession]:
    """A ClientSession of the official SDK with a server program over stdio or streamable HTTP, initialized."""
    if transport == "stdio":
        params = StdioServerParameters(command=command[0], args=command[1:], env=env)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s
        return
    async with http_server(command, env) as url, streamable_http_client(url) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as s:
            await s.initialize()
            yield s


def example_command() -> list[str]:
    return [sys.executable, str(EXAMPLE)]
