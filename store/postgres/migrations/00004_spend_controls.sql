-- Spend controls and low-balance alerts (issue 17): one JSON column holding
-- an entitlement's limits and alerts in the shape the API shows them
-- ({"limits": {...}, "alerts": [...]}), written with the entitlement in every
-- transaction that charges it, so each decision sees them under the row lock;
-- and an account's account-wide limits ({"maxPerCall": [...],
-- "maxUnitsPerCall": n}), which charges read and never write.

-- +goose Up
ALTER TABLE entitlements ADD COLUMN controls jsonb NOT NULL DEFAULT '{}';
ALTER TABLE accounts ADD COLUMN limits jsonb NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE accounts DROP COLUMN limits;
ALTER TABLE entitlements DROP COLUMN controls;
