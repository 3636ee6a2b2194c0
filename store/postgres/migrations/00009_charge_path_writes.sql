-- A charge writes less (issue 27); docs/postgres.md says why each change
-- loses no guarantee.
--
-- The foreign keys of the rows a charge inserts are checked by triggers
-- that, per row, look the referenced row up and lock it (FOR KEY SHARE), at
-- a cost close to the insert's own; what they guarantee the store already
-- does in the same transaction:
--   * a consumption's or hold's entitlement is the row the transaction holds
--     locked FOR UPDATE (the lane's batch, or a consume alone), and
--     entitlements are never deleted;
--   * a charge key is inserted in the same transaction as the consumption
--     or hold it names (batch.queueWrites is the one writer of the three
--     tables), and consumptions and holds are never deleted.
--
-- The entitlement row, updated by every charge, leaves room on its page
-- (fillfactor), so the update is a heap-only tuple more often: no new entry
-- in its three indexes, none of whose columns a charge changes. It applies
-- to pages written from now on.
--
-- A consumption had two indexes by agent and time besides its primary key:
-- consumptions_by_agent (agent_id, occurred_at, id) for ListConsumptions'
-- pages and consumptions_usage (agent_id, occurred_at) INCLUDE (…) for
-- Usage. One index with both keys and the included columns serves both
-- (the pages by its keys, Usage by an index-only scan), so a charge writes
-- two index entries instead of three.
--
-- Without a transaction, as indexes are built concurrently (a deployment
-- keeps charging meanwhile); every step can run again after a failure: an
-- index a failed build left invalid is dropped and built again.

-- +goose NO TRANSACTION
-- +goose Up

ALTER TABLE consumptions DROP CONSTRAINT IF EXISTS consumptions_entitlement_id_fkey;
ALTER TABLE holds DROP CONSTRAINT IF EXISTS holds_entitlement_id_fkey;
ALTER TABLE charge_keys
    DROP CONSTRAINT IF EXISTS charge_keys_consumption_id_fkey,
    DROP CONSTRAINT IF EXISTS charge_keys_hold_id_fkey;
ALTER TABLE entitlements SET (fillfactor = 70);

-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'consumptions_by_agent_at' AND NOT i.indisvalid AND pg_table_is_visible(c.oid)) THEN
        DROP INDEX consumptions_by_agent_at;
    END IF;
END
$$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS consumptions_by_agent_at ON consumptions (agent_id, occurred_at, id)
    INCLUDE (service, tool, entitlement_type, units, cost_cents, cost_currency, refund_units, refund_cost_cents);
DROP INDEX CONCURRENTLY IF EXISTS consumptions_by_agent;
DROP INDEX CONCURRENTLY IF EXISTS consumptions_usage;

-- +goose Down

CREATE INDEX CONCURRENTLY IF NOT EXISTS consumptions_usage ON consumptions (agent_id, occurred_at)
    INCLUDE (service, tool, entitlement_type, units, cost_cents, cost_currency, refund_units, refund_cost_cents);
CREATE INDEX CONCURRENTLY IF NOT EXISTS consumptions_by_agent ON consumptions (agent_id, occurred_at, id);
DROP INDEX CONCURRENTLY IF EXISTS consumptions_by_agent_at;
ALTER TABLE entitlements RESET (fillfactor);
ALTER TABLE charge_keys
    ADD CONSTRAINT charge_keys_consumption_id_fkey FOREIGN KEY (consumption_id) REFERENCES consumptions (id),
    ADD CONSTRAINT charge_keys_hold_id_fkey FOREIGN KEY (hold_id) REFERENCES holds (id);
ALTER TABLE holds ADD CONSTRAINT holds_entitlement_id_fkey FOREIGN KEY (entitlement_id) REFERENCES entitlements (id);
ALTER TABLE consumptions ADD CONSTRAINT consumptions_entitlement_id_fkey FOREIGN KEY (entitlement_id) REFERENCES entitlements (id);
