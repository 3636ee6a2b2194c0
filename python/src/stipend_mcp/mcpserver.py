"""The gate on MCPServer of the official MCP Python SDK (mcp 2.x), as a ServerMiddleware.

The middleware sees every request before the SDK validates it: tools/call is
charged by the gate, tools/list gets each tool's price in _meta, and every
other method passes straight through. Results stay the SDK's models, which
the SDK serialises for each connection's protocol era.
"""

from __future__ import annotations

import weakref
from typing import Any

from .gate import META, Call, Gate, GatedCall, random_nonce
from .key import request_stamp
from .refusal import Refusal, refusal_text
from .wallet import DESCRIPTION, TITLE, TOOL_META, WALLET_MIME_TYPE, WALLET_URI, Wallet, app_reader, show_wallet

__all__ = ["StipendMiddleware", "accepts", "add_wallet", "attach"]


def accepts(server: Any) -> bool:
    """Whether server is an MCPServer of mcp 2.x."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        return False
    return isinstance(server, MCPServer)


def attach(gate: Gate, server: Any) -> None:
    """Appends the gate's middleware to server's chain."""
    server.middleware.append(StipendMiddleware(gate, server))


def add_wallet(gate: Gate, server: Any, w: Wallet) -> None:
    """Registers the wallet tool and its app's resource on server (Gate.add_wallet)."""
    from mcp_types import CallToolResult

    async def wallet() -> CallToolResult:
        return CallToolResult.model_validate(await show_wallet(w, gate.timeout, gate.log))

    wallet.__annotations__ = {"return": CallToolResult}  # the SDK reads it; the module's annotations are strings
    server.add_tool(wallet, name=w.tool, title=TITLE, description=DESCRIPTION, meta=TOOL_META)
    server.resource(WALLET_URI, name="wallet", title=TITLE, mime_type=WALLET_MIME_TYPE, meta=w.resource_meta())(app_reader())


class _Results:
    """Tool results as the SDK's models (CallToolResult, InputRequiredResult), which the SDK serialises for the
    connection's protocol era."""

    def __init__(self) -> None:
        from mcp_types import CallToolResult, InputRequiredResult, TextContent

        self.call_tool_result = CallToolResult
        self.input_required = InputRequiredResult
        self.text = TextContent

    def model(self, result: Any) -> Any:
        """result as a model (a middleware further in may answer a dict)."""
        if isinstance(result, dict):
            kind = self.input_required if result.get("resultType") == "input_required" else self.call_tool_result
            return kind.model_validate(result)
        return result

    def succeeded(self, result: Any) -> bool:
        return not isinstance(result, self.input_required) and not getattr(result, "is_error", False)

    def with_meta(self, result: Any, key: str, value: Any) -> Any:
        return result.model_copy(update={"meta": {**(result.meta or {}), key: value}})

    def refusal(self, refusal: Refusal, structured: bool) -> Any:
        return self.call_tool_result(
            content=[self.text(type="text", text=refusal_text(refusal))],
            is_error=True,
            structured_content=dict(refusal) if structured else None,
            _meta={META["refusal"]: refusal},  # type: ignore[call-arg]  # the alias of meta
        )


class StipendMiddleware:
    """The gate as a ServerMiddleware of mcp 2.x (Gate.attach appends it to MCPServer.middleware)."""

    def __init__(self, gate: Gate, server: Any) -> None:
        self.gate = gate
        self.server = server
        self._results = _Results()
        # The nonce of each connection (stdio, in memory): requests on one
        # connection with the same JSON-RPC id are one request delivered twice.
        self._nonces: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/list" and ctx.request_id is not None:
            res = await call_next(ctx)
            if isinstance(res, dict):
                return {**res, "tools": [self._priced(t) for t in res.get("tools", [])]}
            return res.model_copy(update={"tools": [self._priced(t) for t in res.tools]})
        params = ctx.params
        if ctx.method != "tools/call" or ctx.request_id is None or not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return await call_next(ctx)
        from mcp.server.auth.middleware.auth_context import get_access_token

        session, request = self._material(ctx)
        arguments = params.get("arguments")
        state = params.get("requestState")

        results = self._results

        async def run() -> Any:
            return results.model(await call_next(ctx))

        call: Call[Any] = Call(
            tool=params["name"],
            arguments=arguments if isinstance(arguments, dict) else None,
            meta=params.get("_meta") if isinstance(params.get("_meta"), dict) else None,
            request_state=state if isinstance(state, str) else None,
            access_token=get_access_token(),
            session=session,
            request=request,
            run=run,
            declares_output_schema=lambda: self._declares_output_schema(params["name"]),
            results=results,
        )
        return await GatedCall(self.gate, call).handle()

    def _priced(self, tool: Any) -> Any:
        """tool (a Tool, or its dict) with the gate's terms in its _meta."""
        if isinstance(tool, dict):
            terms = self.gate.terms(tool.get("name", ""))
            return tool if terms is None else {**tool, "_meta": {**(tool.get("_meta") or {}), META["price"]: terms}}
        terms = self.gate.terms(tool.name)
        return tool if terms is None else tool.model_copy(update={"meta": {**(tool.meta or {}), META["price"]: terms}})

    def _material(self, ctx: Any) -> tuple[str, str]:
        """The session and the request stamp of a call without a client key, as the Go and TypeScript gates make them."""
        http = ctx.request
        if http is not None:
            session_id = http.headers.get("mcp-session-id") or ""
            if session_id:
                return session_id, request_stamp("http:" + session_id, ctx.request_id)
            return "", request_stamp("http:" + random_nonce(), ctx.request_id)  # stateless: each post is a new call
        connection = getattr(ctx.session, "_connection", None)
        if connection is None:
            return "", request_stamp(random_nonce(), ctx.request_id)
        nonce = self._nonces.get(connection)
        if nonce is None:
            nonce = self._nonces[connection] = random_nonce()
        return "", request_stamp(nonce, ctx.request_id)

    async def _declares_output_schema(self, tool: str) -> bool:
        """Whether tool may declare an output schema (True when it cannot tell)."""
        try:
            for t in await self.server.list_tools():
                if t.name == tool:
                    return t.output_schema is not None
            return False
        except Exception:
            return True
