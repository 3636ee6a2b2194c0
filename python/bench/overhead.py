"""The Python gate's overhead per tool call, measured as the Go and TypeScript gates' are: one tools/call of
examples/paidtools-py's forecast through the SDK's own in-process client, with and without the gate, on
MCPServer (mcp.Client) and on FastMCP (fastmcp.Client), every setup called once per round in rotating order,
in one run. The gated setups charge a real stipend serve (memory store) on loopback, every call under its own
key (policy on_success: authorize, then capture).

    STIPEND_BIN=... python bench/overhead.py [rounds]    (default 300, after 30 rounds of warm-up)

scripts/test-python's virtual environment has everything it needs.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "tests"))
from conftest import start_stipend  # noqa: E402

spec = importlib.util.spec_from_file_location("paidtools_py", REPO / "examples" / "paidtools-py" / "server.py")
assert spec and spec.loader
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


async def main(rounds: int) -> None:
    # FastMCP sets up rich INFO logging on import, which would log (and time) every request to Stipend;
    # servers in production log at WARNING.
    import fastmcp  # noqa: F401

    logging.getLogger("httpx").setLevel(logging.WARNING)
    binary = os.environ.get("STIPEND_BIN")
    if not binary:
        binary = str(Path(tempfile.mkdtemp()) / "stipend")
        subprocess.run(["go", "build", "-o", binary, "./cmd/stipend"], cwd=REPO, check=True)
    stipend = start_stipend(binary)
    try:
        stipend.fund("bench", 10**12)
        env = {"STIPEND_URL": stipend.url, "STIPEND_HOST_KEY": stipend.keys["host"]}
        import fastmcp
        import mcp

        setups: dict[str, Any] = {}
        async with AsyncExitStack() as stack:
            for sdk, client in (("mcp", mcp.Client), ("fastmcp", fastmcp.Client)):
                for gated in (False, True):
                    server = example.new_server(sdk, example.new_gate(env) if gated else None)
                    setups[f"{sdk}, {'gate, real Stipend' if gated else 'no gate'}"] = await stack.enter_async_context(client(server))
            names = list(setups)
            times: dict[str, list[float]] = {n: [] for n in names}
            n = 0
            for r in range(rounds + 30):
                for i in range(len(names)):
                    name = names[(r + i) % len(names)]
                    n += 1
                    meta = {"io.stipend/agent-id": "bench", "io.stipend/idempotency-key": f"bench-{n}"}
                    t0 = time.perf_counter()
                    res = await setups[name].call_tool("forecast", {"city": "Oslo"}, meta=meta)
                    dt = time.perf_counter() - t0
                    if getattr(res, "is_error", False):
                        raise SystemExit(f"{name}: {res}")
                    if r >= 30:
                        times[name].append(dt * 1e6)
        load = os.getloadavg()[0]
        print(f"| {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {sys.version.split()[0]}, load {load:.1f}, "
              f"{rounds} rounds | p50 µs | p90 µs | p50 − ungated µs |")
        print("|---|---:|---:|---:|")
        for name in names:
            t = sorted(times[name])
            p50, p90 = statistics.median(t), t[int(len(t) * 0.9)]
            base = statistics.median(times[name.split(",")[0] + ", no gate"])
            diff = "" if name.endswith("no gate") else f"**+{p50 - base:,.0f}**"
            print(f"| {name} | {p50:,.0f} | {p90:,.0f} | {diff} |")
    finally:
        stipend.proc.kill()
        stipend.proc.wait()


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 300)
