"""The idempotency key a call is charged under, byte for byte as the Go and TypeScript gates derive it."""

from __future__ import annotations

import hashlib
import json
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

    Arguments with no canonical form (a number beyond what I-JSON allows, a
    lone surrogate) are hashed as json.dumps writes them compactly.
    """
    if arguments is None:
        return b""
    try:
        return rfc8785.dumps(arguments)
    except (rfc8785.CanonicalizationError, ValueError, TypeError):
        return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False).encode()


def request_stamp(nonce: str, request_id: str | int | float) -> str:
    """The stamp of a JSON-RPC request: nonce, "/" and "s:" and a string id or "n:" and a whole numeric one."""
    if isinstance(request_id, str):
        return f"{nonce}/s:{request_id}"
    return f"{nonce}/n:{int(request_id)}"
