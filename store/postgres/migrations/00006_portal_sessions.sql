-- +goose Up
-- Portal sessions (package portal): the end user's short-lived,
-- single-agent credential, stored with the SHA-256 of its token, never the
-- token. Read by ID only (the token names its session).
CREATE TABLE portal_sessions (
    id           text PRIMARY KEY,
    agent_id     text NOT NULL,
    token_sha256 text NOT NULL,
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);

-- +goose Down
DROP TABLE portal_sessions;
