-- Shared wallets (issue 28): an account's kind, the memberships of wallets,
-- and the wallet a member's consumption or hold was charged to.
--
-- A membership's caps are entitlement.Limits in the shape the API shows
-- them, the member's spend of the period included ({"maxPerCall": …,
-- "spendLimit": {"period", "max", "maxUnits", "spent", "spentUnits",
-- "resetAt", "anchor"}}); its holds are what the member's open holds on the
-- wallet's entitlements reserve against the period ([{"id", "cents",
-- "units", "expiresAt"}]). A charge of a member reads its membership row
-- locked in the same transaction as the entitlement's, and writes it back
-- when it changed.
--
-- "An account's consumptions" (ListConsumptions, Usage) are those whose
-- agent_id or wallet_id is the account: the agent's index serves the
-- first, consumptions_by_wallet the second. It is partial, so a charge of
-- an agent's own entitlement writes no entry in it.

-- +goose Up
ALTER TABLE accounts ADD COLUMN kind text NOT NULL DEFAULT '' CHECK (kind IN ('', 'wallet'));

CREATE TABLE memberships (
    wallet_id  text NOT NULL,
    member_id  text NOT NULL,
    member_order text NOT NULL CHECK (member_order IN ('own_first', 'wallet_first')),
    caps       jsonb NOT NULL DEFAULT '{}',
    holds      jsonb NOT NULL DEFAULT '[]',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (wallet_id, member_id)
);
CREATE INDEX memberships_by_member ON memberships (member_id, wallet_id);

ALTER TABLE consumptions ADD COLUMN wallet_id text NOT NULL DEFAULT '';
CREATE INDEX consumptions_by_wallet ON consumptions (wallet_id, occurred_at, id)
    INCLUDE (agent_id, service, tool, entitlement_type, units, cost_cents, cost_currency, refund_units, refund_cost_cents)
    WHERE wallet_id <> '';
ALTER TABLE holds ADD COLUMN wallet_id text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE holds DROP COLUMN wallet_id;
DROP INDEX consumptions_by_wallet;
ALTER TABLE consumptions DROP COLUMN wallet_id;
DROP TABLE memberships;
ALTER TABLE accounts DROP COLUMN kind;
