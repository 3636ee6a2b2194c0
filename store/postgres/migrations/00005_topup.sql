-- +goose Up
-- Auto top-up (package topup) lives on the account's row, never on an
-- entitlement's, so a charge does not touch it: the settings, the saved
-- Stripe method and the state as one JSON document, and whether the
-- top-up sweep looks at the account (enabled, or one pending).
ALTER TABLE accounts
    ADD COLUMN topup         jsonb,
    ADD COLUMN topup_watched boolean NOT NULL DEFAULT false;
CREATE INDEX accounts_topup_watched ON accounts (created_at, agent_id) WHERE topup_watched;

-- +goose Down
DROP INDEX accounts_topup_watched;
ALTER TABLE accounts
    DROP COLUMN topup,
    DROP COLUMN topup_watched;
