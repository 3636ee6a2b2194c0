-- +goose Up
-- Background jobs every instance runs on a timer (the Stripe
-- reconciliation sweep) take turns through a claim (store.Claimer).
CREATE TABLE job_claims (
    name  text PRIMARY KEY,
    owner text NOT NULL,
    until timestamptz NOT NULL
);

-- +goose Down
DROP TABLE job_claims;
