package postgres

import (
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SessionTimeouts sets, on every connection cfg opens, the server's bounds on
// locks (issue 29): lock_timeout, how long a statement waits for a lock held
// by another transaction before it fails (55P03, which the store answers
// as unavailable: retry with the same key); and
// idle_in_transaction_session_timeout, how long a transaction may sit idle
// between statements before the server ends its session, rolling it back
// and releasing its row locks. The second is what frees a hot entitlement
// from an instance that froze (SIGSTOP, a stalled VM) mid-transaction;
// Stipend's own transactions are never idle longer than a round trip. Zero
// leaves a setting to the server (postgresql.conf, ALTER ROLE, or the
// connection URL's own parameter). They are sent as startup parameters.
func SessionTimeouts(cfg *pgxpool.Config, lock, idleInTransaction time.Duration) {
	set := func(name string, d time.Duration) {
		if d > 0 {
			cfg.ConnConfig.RuntimeParams[name] = strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
		}
	}
	set("lock_timeout", lock)
	set("idle_in_transaction_session_timeout", idleInTransaction)
}
