-- The first schema of the PostgreSQL store: every table the entitlement and
-- delivery contracts need. Money is integer cents (the cents domain) within
-- ±(2^53 − 1), the ceiling receipts share (see package money); the unique
-- keys are the store's double-charge and duplicate guards.

-- +goose Up

CREATE DOMAIN cents AS bigint
    CHECK (VALUE BETWEEN -9007199254740991 AND 9007199254740991);

-- An ISO 4217-shaped code, or '' where an amount is absent.
CREATE DOMAIN currency AS text
    CHECK (VALUE = '' OR VALUE ~ '^[A-Z]{3}$');

CREATE TABLE accounts (
    agent_id     text PRIMARY KEY,
    display_name text NOT NULL DEFAULT '',
    metadata     jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);

CREATE TABLE entitlements (
    id               text PRIMARY KEY,
    agent_id         text NOT NULL,
    type             text NOT NULL CHECK (type IN ('credits', 'quota', 'subscription')),
    scope_service    text NOT NULL,
    scope_tools      text[] NOT NULL DEFAULT '{}',
    status           text NOT NULL CHECK (status IN ('active', 'revoked')),
    created_at       timestamptz NOT NULL,
    expires_at       timestamptz,
    revoked_at       timestamptz,
    payment_id       text NOT NULL DEFAULT '',
    metadata         jsonb NOT NULL DEFAULT '{}',
    balance_cents    cents NOT NULL DEFAULT 0,
    balance_currency currency NOT NULL DEFAULT '',
    granted_cents    cents NOT NULL DEFAULT 0,
    granted_currency currency NOT NULL DEFAULT '',
    quota_limit      bigint NOT NULL DEFAULT 0,
    quota_period     text NOT NULL DEFAULT '',
    quota_remaining  bigint NOT NULL DEFAULT 0,
    quota_reset_at   timestamptz,
    quota_anchor     timestamptz,
    valid_from       timestamptz,
    valid_until      timestamptz,
    -- The open holds (entitlement.Entitlement.Holds): [{"id", "amount",
    -- "expiresAt"}], written with the entitlement in every transaction that
    -- changes them, so each spending decision sees them under the row lock.
    holds            jsonb NOT NULL DEFAULT '[]'
);
CREATE INDEX entitlements_by_agent ON entitlements (agent_id, created_at, id);
CREATE INDEX entitlements_active ON entitlements (agent_id) WHERE status = 'active';

CREATE TABLE consumptions (
    id                     text PRIMARY KEY,
    agent_id               text NOT NULL,
    idempotency_key        text NOT NULL,
    entitlement_id         text NOT NULL REFERENCES entitlements (id),
    entitlement_type       text NOT NULL,
    service                text NOT NULL,
    tool                   text NOT NULL,
    cost_cents             cents NOT NULL DEFAULT 0,
    cost_currency          currency NOT NULL DEFAULT '',
    units                  bigint NOT NULL,
    occurred_at            timestamptz NOT NULL,
    balance_after_cents    cents NOT NULL DEFAULT 0,
    balance_after_currency currency NOT NULL DEFAULT '',
    remaining_after        bigint,
    hold_id                text NOT NULL DEFAULT '',
    fingerprint            text NOT NULL,
    refund_cost_cents      cents,
    refund_cost_currency   currency,
    refund_units           bigint,
    refunded_at            timestamptz
);
CREATE INDEX consumptions_by_agent ON consumptions (agent_id, occurred_at, id);

CREATE TABLE holds (
    id                     text PRIMARY KEY,
    agent_id               text NOT NULL,
    entitlement_id         text NOT NULL REFERENCES entitlements (id),
    entitlement_type       text NOT NULL,
    service                text NOT NULL,
    tool                   text NOT NULL,
    idempotency_key        text NOT NULL,
    status                 text NOT NULL CHECK (status IN ('held', 'captured', 'released', 'expired')),
    max_cost_cents         cents NOT NULL DEFAULT 0,
    max_cost_currency      currency NOT NULL DEFAULT '',
    max_units              bigint NOT NULL,
    created_at             timestamptz NOT NULL,
    expires_at             timestamptz NOT NULL,
    ended_at               timestamptz,
    captured_cost_cents    cents,
    captured_cost_currency currency,
    captured_units         bigint,
    consumption_id         text NOT NULL DEFAULT '',
    fingerprint            text NOT NULL
);
-- The sweep of ExpireHolds finds idle entitlements through their open holds.
CREATE INDEX holds_open_by_expiry ON holds (expires_at) WHERE status = 'held';

-- One (agent, idempotency key) names one consume or one hold: this is the
-- guard across both kinds. A captured hold keeps its row (hold_id); its
-- consumption names the hold.
CREATE TABLE charge_keys (
    agent_id        text NOT NULL,
    idempotency_key text NOT NULL,
    consumption_id  text REFERENCES consumptions (id),
    hold_id         text REFERENCES holds (id),
    PRIMARY KEY (agent_id, idempotency_key),
    CHECK (num_nonnulls(consumption_id, hold_id) = 1)
);

CREATE TABLE payments (
    id                 text PRIMARY KEY,
    agent_id           text NOT NULL,
    amount_cents       cents NOT NULL,
    amount_currency    currency NOT NULL,
    provider           text NOT NULL,
    provider_intent_id text NOT NULL DEFAULT '',
    description        text NOT NULL DEFAULT '',
    -- The grant template (payment.Grant) as its JSON.
    grant_template     jsonb NOT NULL,
    status             text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'refunded')),
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    succeeded_at       timestamptz,
    failed_at          timestamptz,
    failure_reason     text NOT NULL DEFAULT '',
    refunded_at        timestamptz,
    receipt_id         text NOT NULL DEFAULT '',
    refund_receipt_id  text NOT NULL DEFAULT '',
    entitlement_ids    text[] NOT NULL DEFAULT '{}',
    idempotency_key    text NOT NULL UNIQUE,
    fingerprint        text NOT NULL
);
CREATE UNIQUE INDEX payments_by_provider_intent ON payments (provider_intent_id) WHERE provider_intent_id <> '';

CREATE TABLE receipts (
    id         text PRIMARY KEY,
    agent_id   text NOT NULL,
    payment_id text NOT NULL REFERENCES payments (id),
    issued_at  timestamptz NOT NULL,
    -- The signed payload (receipt.Receipt) as its JSON, and its compact JWS.
    payload    jsonb NOT NULL,
    jws        text NOT NULL
);
CREATE INDEX receipts_by_agent ON receipts (agent_id, issued_at, id);

-- The outbox. seq orders events written at one instant in the order their
-- transaction wrote them.
CREATE TABLE events (
    id          text PRIMARY KEY,
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    type        text NOT NULL,
    agent_id    text NOT NULL DEFAULT '',
    occurred_at timestamptz NOT NULL,
    -- json, not jsonb: the data is delivered as the exact bytes written.
    data        json NOT NULL,
    dispatched  boolean NOT NULL DEFAULT false
);
CREATE INDEX events_pending ON events (occurred_at, seq) WHERE NOT dispatched;

-- Inbound provider events (RecordInboundEvent and PaymentChange.Inbound).
CREATE TABLE inbound_events (
    source        text NOT NULL,
    event_id      text NOT NULL,
    first_seen_at timestamptz NOT NULL,
    PRIMARY KEY (source, event_id)
);

CREATE TABLE webhook_endpoints (
    id              text PRIMARY KEY,
    url             text NOT NULL,
    event_types     text[] NOT NULL DEFAULT '{}',
    secret          text NOT NULL,
    -- The secret the last rotation replaced, signing too until it expires.
    previous_secret            text NOT NULL DEFAULT '',
    previous_secret_expires_at timestamptz,
    disabled        boolean NOT NULL DEFAULT false,
    disabled_reason text NOT NULL DEFAULT '',
    disabled_at     timestamptz,
    created_at      timestamptz NOT NULL
);
CREATE INDEX webhook_endpoints_by_age ON webhook_endpoints (created_at, id);

CREATE TABLE deliveries (
    id               text PRIMARY KEY,
    key              text NOT NULL UNIQUE,
    endpoint_id      text NOT NULL,
    event_id         text NOT NULL,
    event_type       text NOT NULL,
    payload          bytea NOT NULL,
    status           text NOT NULL CHECK (status IN ('pending', 'in_flight', 'succeeded', 'failed', 'dead')),
    attempts         integer NOT NULL DEFAULT 0,
    scheduled_at     timestamptz NOT NULL,
    claimed_by       text NOT NULL DEFAULT '',
    claimed_at       timestamptz,
    claim_token      text NOT NULL DEFAULT '',
    last_status_code integer NOT NULL DEFAULT 0,
    last_error       text NOT NULL DEFAULT '',
    last_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);
CREATE INDEX deliveries_by_age ON deliveries (created_at, id);
CREATE INDEX deliveries_by_status ON deliveries (status, created_at, id);
CREATE INDEX deliveries_by_event_type ON deliveries (event_type, created_at, id);
CREATE INDEX deliveries_due ON deliveries (scheduled_at, id) WHERE status = 'pending';
CREATE INDEX deliveries_claimed ON deliveries (claimed_at, id) WHERE status = 'in_flight';

-- +goose Down

DROP TABLE deliveries;
DROP TABLE webhook_endpoints;
DROP TABLE inbound_events;
DROP TABLE events;
DROP TABLE receipts;
DROP TABLE payments;
DROP TABLE charge_keys;
DROP TABLE holds;
DROP TABLE consumptions;
DROP TABLE entitlements;
DROP TABLE accounts;
DROP DOMAIN currency;
DROP DOMAIN cents;
