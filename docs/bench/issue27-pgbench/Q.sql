\set a random(1, 1000)
\set r random(1, 1000000000000)
\startpipeline
SELECT id, agent_id, type, scope_service, scope_tools, status, created_at, expires_at, revoked_at, payment_id, metadata, balance_cents, balance_currency, granted_cents, granted_currency, quota_limit, quota_period, quota_remaining, quota_reset_at, quota_anchor, valid_from, valid_until, holds, controls, xmin FROM entitlements WHERE agent_id = 'a' || :a AND status = 'active' ORDER BY id;
SELECT agent_id, idempotency_key, consumption_id, hold_id FROM charge_keys WHERE agent_id = 'a' || :a AND idempotency_key = 'key-' || :r;
SELECT limits, kind, EXISTS (SELECT 1 FROM memberships WHERE member_id = 'a' || :a) FROM accounts WHERE agent_id = 'a' || :a;
\endpipeline
