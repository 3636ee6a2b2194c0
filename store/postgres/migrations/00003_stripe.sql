-- +goose Up
-- A payment made through Stripe Checkout keeps its session (payment.Checkout);
-- partial refunds keep their running total (refunded_cents, in the payment's
-- currency; 0 for none) and a dispute its instant and reason; the
-- reconciliation sweep lists pending payments per provider, oldest first.
ALTER TABLE payments
    ADD COLUMN checkout_session_id text NOT NULL DEFAULT '',
    ADD COLUMN checkout_url        text NOT NULL DEFAULT '',
    ADD COLUMN checkout_expires_at timestamptz,
    ADD COLUMN refunded_cents      cents NOT NULL DEFAULT 0,
    ADD COLUMN disputed_at         timestamptz,
    ADD COLUMN dispute_reason      text NOT NULL DEFAULT '';
CREATE INDEX payments_pending ON payments (provider, created_at, id) WHERE status = 'pending';

-- +goose Down
DROP INDEX payments_pending;
ALTER TABLE payments
    DROP COLUMN checkout_session_id,
    DROP COLUMN checkout_url,
    DROP COLUMN checkout_expires_at,
    DROP COLUMN refunded_cents,
    DROP COLUMN disputed_at,
    DROP COLUMN dispute_reason;
