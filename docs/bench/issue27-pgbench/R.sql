\set a random(1, 1000)
\set r random(1, 1000000000000)
BEGIN;
UPDATE entitlements SET balance_cents = balance_cents - 1 WHERE id = 'e' || :a AND balance_cents >= 1 RETURNING balance_cents;
INSERT INTO ref_c VALUES ('a' || :a, 'key-' || :r, 'c0a8f5b2-1111-4c3e-9a7b-' || :r, 1, now()) ON CONFLICT DO NOTHING;
COMMIT;
