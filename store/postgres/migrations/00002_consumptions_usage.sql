-- The index of usage queries (Usage): an agent's consumptions in a range of
-- time, covering every column the aggregation reads, so GROUP BY by tool,
-- service, hour or day is answered from the index alone. Built
-- concurrently, outside a transaction, so a deployment with many
-- consumptions keeps charging while it builds. A build that failed leaves
-- an invalid index behind and goose does not record the migration: the
-- next attempt drops that index and builds it again.

-- +goose NO TRANSACTION
-- +goose Up

DROP INDEX CONCURRENTLY IF EXISTS consumptions_usage;
CREATE INDEX CONCURRENTLY consumptions_usage ON consumptions (agent_id, occurred_at)
    INCLUDE (service, tool, entitlement_type, units, cost_cents, cost_currency, refund_units, refund_cost_cents);

-- +goose Down

DROP INDEX CONCURRENTLY IF EXISTS consumptions_usage;
