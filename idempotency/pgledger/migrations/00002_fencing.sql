-- Fencing: the store's transaction of a fenced route's change marks the
-- reservation written (written_at), and only a fenced row that is not
-- marked may be reclaimed (idempotency.Ledger.Reclaim).

-- +goose Up

ALTER TABLE idempotency_ledger
    ADD COLUMN fenced     boolean NOT NULL DEFAULT false,
    ADD COLUMN written_at timestamptz;

-- +goose Down

ALTER TABLE idempotency_ledger DROP COLUMN written_at, DROP COLUMN fenced;
