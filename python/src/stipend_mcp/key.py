"""The idempotency key a call is charged under, byte for byte as the Go and TypeScript gates derive it."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import rfc8785

__all__ = ["arguments_json", "idempotency_key", "request_stamp"]


def idempotency_key(
    service: str,
    tool: str,
    arguments: Any,
    *,
    client_key: str | None = None,
    session: str = "",
    request: str = "",
    request_state: str | None = None,
) -> str:
    """Derives the key Stipend charges a call under, as mcpgate/key.go does.

    SHA-256 over length-prefixed fields (8-byte big-endian lengths): "client"
    and the client's key, or else "request", the session id ("" without one)
    and the request stamp (request_stamp); then the service, the tool name,
    the arguments in RFC 8785 canonical form (arguments_json) and, for a
    request that continues a call after an input-required result, "state"
    and its requestState. The result is "mcp-" and 64 hex digits: valid
    whatever the client sent, and it never reveals the client's key.
    """
    h = hashlib.sha256()

    def field(s: str | bytes) -> None:
        b = s.encode() if isinstance(s, str) else s
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)

    if client_key:
        field("client")
        field(client_key)
    else:
        field("request")
        field(session)
        field(request)
    field(service)
    field(tool)
    field(arguments_json(arguments))
    if request_state:
        field("state")
        field(request_state)
    return "mcp-" + h.hexdigest()


def arguments_json(arguments: Any) -> bytes:
    """The arguments as the gates hash them: RFC 8785 canonical JSON, and b"" for none.

    Numbers are what a JavaScript or Go JSON decoder makes of them: an integer
    beyond 2^53 is rounded to the nearest double, as the other gates do.
    Arguments with no canonical form (a lone surrogate) are hashed as
    JavaScript's JSON.stringify writes them, as the TypeScript gate does.
    """
    if arguments is None:
        return b""
    doubled = _as_doubles(arguments)
    try:
        return rfc8785.dumps(doubled)
    except (rfc8785.CanonicalizationError, ValueError, TypeError):
        text = json.dumps(doubled, separators=(",", ":"), ensure_ascii=False)
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SAFE = 2**53


def _as_doubles(v: Any) -> Any:
    """v with every integer beyond what a double holds exactly made a float."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return float(v) if not -_SAFE <= v <= _SAFE else v
    if isinstance(v, dict):
        return {k: _as_doubles(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_as_doubles(x) for x in v]
    return v


def request_stamp(nonce: str, request_id: str | int | float) -> str:
    """The stamp of a JSON-RPC request: nonce, "/" and "s:" and a string id or "n:" and a whole numeric one."""
    if isinstance(request_id, str):
        return f"{nonce}/s:{request_id}"
    return f"{nonce}/n:{int(request_id)}"
