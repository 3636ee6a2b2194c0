\set a random(1, 1000)
\set r random(1, 1000000000000)
SELECT agent_id, idempotency_key, consumption_id, hold_id FROM charge_keys WHERE agent_id = 'a' || :a AND idempotency_key = 'key-' || :r;
SELECT limits, kind, EXISTS (SELECT 1 FROM memberships WHERE member_id = 'a' || :a) FROM accounts WHERE agent_id = 'a' || :a;
