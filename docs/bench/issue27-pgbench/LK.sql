\set a random(1, 1000)
\set r random(1, 1000000000000)
\startpipeline
BEGIN;
SELECT id, agent_id, type, scope_service, scope_tools, status, created_at, expires_at, revoked_at, payment_id, metadata, balance_cents, balance_currency, granted_cents, granted_currency, quota_limit, quota_period, quota_remaining, quota_reset_at, quota_anchor, valid_from, valid_until, holds, controls FROM entitlements WHERE agent_id = 'a' || :a AND status = 'active' ORDER BY id FOR UPDATE;
SELECT agent_id, idempotency_key, consumption_id, hold_id FROM charge_keys WHERE agent_id = 'a' || :a AND idempotency_key = 'key-' || :r;
SELECT limits, kind, EXISTS (SELECT 1 FROM memberships WHERE member_id = 'a' || :a) FROM accounts WHERE agent_id = 'a' || :a;
\endpipeline
\startpipeline
WITH w0 AS (UPDATE entitlements SET balance_cents = 1000000 - :a, quota_remaining = 0, quota_reset_at = NULL, holds = '[]'::jsonb, status = 'active', revoked_at = NULL, controls = '{}'::jsonb, metadata = '{}'::jsonb, expires_at = NULL WHERE id = 'e' || :a), w1 AS (INSERT INTO consumptions (id, agent_id, idempotency_key, entitlement_id, entitlement_type, service, tool, cost_cents, cost_currency, units, occurred_at, balance_after_cents, balance_after_currency, remaining_after, hold_id, fingerprint, wallet_id) VALUES ('c0a8f5b2-1111-4c3e-9a7b-' || :r, 'a' || :a, 'key-' || :r, 'e' || :a, 'credits', 'svc', 'tool', 1, 'USD', 0, now(), 99, 'USD', NULL, '', 'f1e2d3c4b5a697887766554433221100ffeeddccbbaa99887766554433221100', '')) INSERT INTO charge_keys (agent_id, idempotency_key, consumption_id, hold_id) VALUES ('a' || :a, 'key-' || :r, 'c0a8f5b2-1111-4c3e-9a7b-' || :r, NULL);
COMMIT;
\endpipeline
