-- +goose Up
-- A payment made through Stripe Checkout keeps its session (payment.Checkout);
-- the reconciliation sweep lists pending payments per provider, oldest first.
ALTER TABLE payments
    ADD COLUMN checkout_session_id text NOT NULL DEFAULT '',
    ADD COLUMN checkout_url        text NOT NULL DEFAULT '',
    ADD COLUMN checkout_expires_at timestamptz;
CREATE INDEX payments_pending ON payments (provider, created_at, id) WHERE status = 'pending';

-- +goose Down
DROP INDEX payments_pending;
ALTER TABLE payments
    DROP COLUMN checkout_session_id,
    DROP COLUMN checkout_url,
    DROP COLUMN checkout_expires_at;
