-- The idempotency ledger (ADR-0026) on PostgreSQL: one row per hashed key,
-- per deployment namespace (collection). The raw key is never stored.

-- +goose Up

CREATE TABLE idempotency_ledger (
    collection      text NOT NULL,
    id              text NOT NULL,
    route           text NOT NULL,
    fingerprint     text NOT NULL,
    state           text NOT NULL CHECK (state IN ('in_progress', 'completed')),
    operation_id    text NOT NULL DEFAULT '',
    trace_id        text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    completed_at    timestamptz,
    -- When a completed result stops being replayed; Purge deletes rows some
    -- time after it. Never set on an in-progress row, which never expires.
    expire_at       timestamptz,
    response_status integer,
    response_header jsonb,
    response_body   bytea,
    -- A random nonce of the Reserve call that created the row.
    attempt         text NOT NULL,
    -- The compare-and-set precondition: the server's clock, strictly
    -- increasing on every write of the row.
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (collection, id),
    CHECK ((state = 'completed') = (completed_at IS NOT NULL AND expire_at IS NOT NULL AND response_status IS NOT NULL))
);
CREATE INDEX idempotency_ledger_expiry ON idempotency_ledger (expire_at) WHERE state = 'completed';

-- +goose Down

DROP TABLE idempotency_ledger;
