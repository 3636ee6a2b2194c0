-- A charge writes less (issue 27). The foreign keys of the rows a charge
-- inserts are checked by triggers that, per row, look the referenced row up
-- and lock it (FOR KEY SHARE), at a cost close to the insert's own; what
-- they guarantee the store already does in the same transaction:
--   * a consumption's or hold's entitlement is the row the transaction holds
--     locked FOR UPDATE (the lane's batch, or a consume alone), and
--     entitlements are never deleted;
--   * a charge key is inserted in the same transaction, after the
--     consumption or hold it names (batch.queueWrites is the one writer of
--     all three tables), and consumptions and holds are never deleted.
-- The entitlement row, updated by every charge, leaves room on its page
-- (fillfactor) so the update is a heap-only tuple more often: no new entry
-- in its three indexes, none of whose columns a charge changes. It applies
-- to pages written from now on (a VACUUM FULL or CLUSTER rewrites the old).

-- +goose Up
ALTER TABLE consumptions DROP CONSTRAINT consumptions_entitlement_id_fkey;
ALTER TABLE holds DROP CONSTRAINT holds_entitlement_id_fkey;
ALTER TABLE charge_keys
    DROP CONSTRAINT charge_keys_consumption_id_fkey,
    DROP CONSTRAINT charge_keys_hold_id_fkey;
ALTER TABLE entitlements SET (fillfactor = 70);

-- +goose Down
ALTER TABLE entitlements RESET (fillfactor);
ALTER TABLE charge_keys
    ADD CONSTRAINT charge_keys_consumption_id_fkey FOREIGN KEY (consumption_id) REFERENCES consumptions (id),
    ADD CONSTRAINT charge_keys_hold_id_fkey FOREIGN KEY (hold_id) REFERENCES holds (id);
ALTER TABLE holds ADD CONSTRAINT holds_entitlement_id_fkey FOREIGN KEY (entitlement_id) REFERENCES entitlements (id);
ALTER TABLE consumptions ADD CONSTRAINT consumptions_entitlement_id_fkey FOREIGN KEY (entitlement_id) REFERENCES entitlements (id);
