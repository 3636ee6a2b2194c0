"""The gate on FastMCP 4.x (PrefectHQ's fastmcp), as a FastMCP Middleware.

on_call_tool charges each call; on_list_tools shows each tool's price in its
_meta. A tool that raises reaches the middleware as the exception (FastMCP
turns it into an isError result further out): the gate releases the call's
hold and lets it go on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .gate import META, Call, Gate, GatedCall, random_nonce
from .key import request_stamp
from .refusal import Refusal, refusal_text
from .wallet import DESCRIPTION, TITLE, TOOL_META, WALLET_MIME_TYPE, WALLET_URI, Wallet, app_reader, show_wallet

__all__ = ["accepts", "add_wallet", "attach", "middleware"]


def accepts(server: Any) -> bool:
    """Whether server is a FastMCP server of fastmcp 4.x."""
    try:
        from fastmcp import FastMCP
    except ImportError:
        return False
    return isinstance(server, FastMCP)


def attach(gate: Gate, server: Any) -> None:
    """Adds the gate's middleware to server."""
    server.add_middleware(middleware(gate, server))


def add_wallet(gate: Gate, server: Any, w: Wallet) -> None:
    """Registers the wallet tool and its app's resource on server (Gate.add_wallet)."""
    from fastmcp.tools.base import ToolResult
    from mcp_types import TextContent

    async def wallet() -> ToolResult:
        res = await show_wallet(w, gate.timeout, gate.log)
        return ToolResult(content=[TextContent(type="text", text=c["text"]) for c in res["content"]],
                          structured_content=res.get("structuredContent"), meta=res.get("_meta"), is_error=res.get("isError", False))

    wallet.__annotations__ = {"return": ToolResult}  # FastMCP reads it; the module's annotations are strings
    server.tool(wallet, name=w.tool, title=TITLE, description=DESCRIPTION, meta=TOOL_META)
    server.resource(WALLET_URI, name="wallet", title=TITLE, mime_type=WALLET_MIME_TYPE, meta=w.resource_meta())(app_reader())


def middleware(gate: Gate, server: Any) -> Any:
    """The gate as a fastmcp Middleware of server (what attach adds)."""
    from fastmcp.server.dependencies import get_access_token, get_http_request
    from fastmcp.server.middleware import Middleware
    from fastmcp.tools.base import InputRequiredToolResult, ToolResult
    from mcp_types import TextContent

    class Results:
        def succeeded(self, result: ToolResult) -> bool:
            # A result asking for input (multi-round-trip) has not finished the call: the request that does is charged.
            return not result.is_error and not isinstance(result, InputRequiredToolResult)

        def with_meta(self, result: ToolResult, key: str, value: Any) -> ToolResult:
            return result.model_copy(update={"meta": {**(result.meta or {}), key: value}})

        def refusal(self, refusal: Refusal, structured: bool) -> ToolResult:
            return ToolResult(
                content=[TextContent(type="text", text=refusal_text(refusal))],
                structured_content=dict(refusal) if structured else None,
                meta={META["refusal"]: refusal},
                is_error=True,
            )

    results = Results()

    def wire(context: Any) -> tuple[Any, Mapping[str, Any]]:
        """The request's JSON-RPC id and raw params, as they came (FastMCP hands middleware a rebuilt
        CallToolRequestParams without the request's _meta, and with {} for absent arguments)."""
        ctx = context.fastmcp_context
        rc = ctx.request_context if ctx is not None else None
        sdk = getattr(rc, "_srctx", None)  # FastMCP's documented escape hatch to the SDK's request context
        params = getattr(sdk, "params", None)
        if isinstance(params, Mapping):
            return sdk.request_id, params
        message = context.message
        return (rc.request_id if rc is not None else None), {
            "name": message.name, "arguments": message.arguments, "_meta": rc.meta if rc is not None else None}

    def material(context: Any, request_id: Any) -> tuple[str, str]:
        if request_id is None:
            return "", request_stamp(random_nonce(), 0)
        try:
            http = get_http_request()
        except RuntimeError:
            http = None
        if http is not None:
            session_id = http.headers.get("mcp-session-id") or ""
            if session_id:
                return session_id, request_stamp("http:" + session_id, request_id)
            return "", request_stamp("http:" + random_nonce(), request_id)  # stateless: each post is a new call
        return "", request_stamp(context.fastmcp_context.session_id, request_id)  # one id per connection (stdio, in memory)

    async def declares_output_schema(tool: str) -> bool:
        try:
            t = await server.get_tool(tool)
        except Exception:
            return True
        return t is not None and t.output_schema is not None

    class StipendMiddleware(Middleware):
        """Charges tool calls to Stipend (Gate.attach adds it to a FastMCP server)."""

        async def on_list_tools(self, context: Any, call_next: Any) -> Sequence[Any]:
            tools = await call_next(context)
            out = []
            for t in tools:
                terms = gate.terms(t.name)
                out.append(t.model_copy(update={"meta": {**(t.meta or {}), META["price"]: terms}}) if terms else t)
            return out

        async def on_call_tool(self, context: Any, call_next: Any) -> Any:
            request_id, params = wire(context)
            session, request = material(context, request_id)
            arguments, meta, state = params.get("arguments"), params.get("_meta"), params.get("requestState")
            tool = context.message.name
            call: Call[Any] = Call(
                tool=tool,
                arguments=arguments if isinstance(arguments, Mapping) else None,
                meta=meta if isinstance(meta, Mapping) else None,
                request_state=state if isinstance(state, str) else None,
                access_token=get_access_token(),
                session=session,
                request=request,
                run=lambda: call_next(context),
                declares_output_schema=lambda: declares_output_schema(tool),
                results=results,
            )
            return await GatedCall(gate, call).handle()

    return StipendMiddleware()
