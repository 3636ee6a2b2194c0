\set a random(1, 1000)
\set r random(1, 1000000000000)
SELECT agent_id FROM accounts WHERE agent_id = 'a' || :a;
