"""StipendClient mints, reads and revokes portal sessions on a real stipend serve, and the token works only for its agent."""

from __future__ import annotations

import httpx
import pytest

from conftest import Stipend
from stipend_mcp import StipendClient, StipendError

pytestmark = pytest.mark.anyio


def balance(stipend: Stipend, token: str, agent: str) -> int:
    with httpx.Client(base_url=stipend.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        return c.get(f"/v1/accounts/{agent}/balance").status_code


async def test_portal_sessions(stipend: Stipend) -> None:
    stipend.fund("agent-portal-py", 500)
    async with StipendClient(stipend.url, stipend.keys["billing"]) as client:
        s = await client.create_portal_session("agent-portal-py", "portal-py-1", ttl_seconds=600)
        assert s["agentId"] == "agent-portal-py"
        assert s["token"].startswith("stp_portal_")
        assert "/portal?session=" in s["url"]
        again = await client.create_portal_session("agent-portal-py", "portal-py-1", ttl_seconds=600)
        assert again["id"] == s["id"], "a retry with the same key answers the same session"

        read = await client.get_portal_session(s["id"])
        assert read["id"] == s["id"] and "token" not in read

        assert balance(stipend, s["token"], "agent-portal-py") == 200
        assert balance(stipend, s["token"], "someone-else") == 401

        revoked = await client.revoke_portal_session(s["id"])
        assert revoked.get("revokedAt")
        assert balance(stipend, s["token"], "agent-portal-py") == 401

        with pytest.raises(StipendError) as e:
            await client.create_portal_session("agent-portal-py", "portal-py-2", ttl_seconds=5)
        assert e.value.status == 400
