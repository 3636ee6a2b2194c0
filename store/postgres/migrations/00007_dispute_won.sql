-- +goose Up
-- A dispute decided for the seller keeps its instant: what the dispute
-- revoked was restored (ProviderPayments.WinDispute).
ALTER TABLE payments ADD COLUMN dispute_won_at timestamptz;

-- +goose Down
ALTER TABLE payments DROP COLUMN dispute_won_at;
