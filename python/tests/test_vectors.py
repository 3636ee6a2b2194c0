"""The Python gate derives the keys and writes the refusal texts the Go gate does, byte for byte.

The vectors come from the Go gate itself: typescript/testdata/idempotency-keys.json
(go test ./typescript -run TestIdempotencyKeyVectors -update) and
mcpgate/testdata/vectors/refusals.json (go test ./mcpgate -run TestRefusalVectors -update).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import REPO
from stipend_mcp import idempotency_key, refusal_text, request_stamp

KEYS = json.loads((REPO / "typescript" / "testdata" / "idempotency-keys.json").read_text())["vectors"]
REFUSALS = json.loads((REPO / "mcpgate" / "testdata" / "vectors" / "refusals.json").read_text())["vectors"]


def test_vectors_cover_both_kinds_of_material() -> None:
    assert any(v.get("clientKey") for v in KEYS) and any(not v.get("clientKey") for v in KEYS)
    assert len(REFUSALS) >= 5


@pytest.mark.parametrize("v", KEYS, ids=lambda v: v["name"])
def test_key(v: dict[str, Any]) -> None:
    # What the SDK delivers: the request's JSON text, parsed.
    args = None if v.get("arguments") is None else json.loads(v["arguments"])
    session = v["sessionId"]
    key = idempotency_key(
        v["service"], v["tool"], args,
        client_key=v.get("clientKey"),
        session=session,
        request=request_stamp("http:" + session, v["requestId"]),
        request_state=v.get("requestState"),
    )
    if v["agrees"]:
        assert key == v["key"]
    else:
        assert key != v["key"], "a vector the TypeScript gate cannot agree with now agrees: check the vectors"


@pytest.mark.parametrize("v", REFUSALS, ids=lambda v: v["name"])
def test_refusal_text(v: dict[str, Any]) -> None:
    assert refusal_text(v["refusal"]) == v["text"]
