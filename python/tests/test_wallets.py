"""StipendClient makes a shared wallet on a real stipend serve: members with daily caps spend it, a cap refuses naming the member."""

from __future__ import annotations

import pytest

from conftest import Stipend
from stipend_mcp import StipendClient, StipendError

pytestmark = pytest.mark.anyio


async def test_shared_wallet(stipend: Stipend) -> None:
    team, alice, bob = "team-py", "alice-py", "bob-py"
    async with (
        StipendClient(stipend.url, stipend.keys["admin"]) as admin,
        StipendClient(stipend.url, stipend.keys["host"]) as host,
    ):
        account = await admin.put_account(team, kind="wallet", display_name="Team")
        assert account["kind"] == "wallet"
        with pytest.raises(StipendError) as e:
            await admin.put_account(team, kind="agent")
        assert e.value.status == 409

        ent = stipend.fund(team, 500)
        daily = {"spendLimit": {"period": "day", "max": {"cents": 20, "currency": "USD"}}}
        m = await admin.add_member(team, alice, "add-alice-py", caps=daily)
        assert (m["memberId"], m["order"]) == (alice, "own_first")
        again = await admin.add_member(team, alice, "add-alice-py", caps=daily)
        assert again == m, "a retry with the same key answers the same membership"
        await admin.add_member(team, bob, "add-bob-py", order="wallet_first")
        with pytest.raises(StipendError) as e:
            await admin.add_member(team, team, "add-self-py")
        assert e.value.status == 400

        def call(agent: str, key: str, cents: int) -> dict[str, object]:
            return {"agentId": agent, "service": "weather", "tool": "forecast", "idempotencyKey": key,
                    "cost": {"cents": cents, "currency": "USD"}}

        done = await host.consume(call(alice, "py-a1", 15))
        assert done["consumption"]["walletId"] == team
        assert done["consumption"]["entitlementId"] == ent
        with pytest.raises(StipendError) as e:
            await host.consume(call(alice, "py-a2", 6))
        denial = e.value.member_limit
        assert denial is not None and denial.get("memberId") == alice and denial.get("limit") == "spendLimit"
        await host.consume(call(bob, "py-b1", 60))

        members = await admin.list_members(team, limit=1)
        assert [x["memberId"] for x in members["items"]] == [alice]
        rest = await admin.list_members(team, cursor=members["nextCursor"])
        assert [x["memberId"] for x in rest["items"]] == [bob]

        wallets = await admin.list_wallets(alice)
        [w] = wallets["items"]
        assert w["walletId"] == team
        assert w["balance"]["credits"][0]["available"]["cents"] == 500 - 75
        assert w["capRoom"]["amount"]["cents"] == 5

        changed = await admin.update_member(team, alice, caps=None)
        assert "caps" not in changed
        await host.consume(call(alice, "py-a2", 6))
        assert (await admin.get_member(team, alice))["memberId"] == alice

        await admin.remove_member(team, bob)
        with pytest.raises(StipendError) as e:
            await admin.remove_member(team, bob)
        assert e.value.status == 404
        with pytest.raises(StipendError) as e:
            await host.consume(call(bob, "py-b2", 1))
        assert e.value.payment_required
