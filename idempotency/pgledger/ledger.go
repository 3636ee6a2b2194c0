// Package pgledger is the durable idempotency ledger on PostgreSQL: the
// ledger backend for deployments on the PostgreSQL store.
//
// One row per key in the table idempotency_ledger, keyed by the deployment
// namespace's collection name (idempotency.CollectionName: "idem_<hex>")
// and the hashed key; the raw key never reaches the database. The table
// lives in the schema of the pool's connections, in the store's database or
// in a dedicated one: the caller chooses by the pool it passes, and
// pgmigrate.Up with Migrations creates it.
//
// Reservation is one INSERT … ON CONFLICT (atomic create-if-absent, which
// also replaces a completed row whose result has expired) of a row carrying
// a random token; completion is an UPDATE and release a DELETE, both
// guarded by that token and the in-progress state. The PostgreSQL store
// checks this ledger's fences (Fence) inside the change's own transaction,
// with an UPDATE of the row that marks it written; Reclaim and the
// operator's resolutions are guarded by the row's update time, the server's
// clock made strictly increasing per row (never equal to, or before, the
// row's previous one), so a stale read can never match a row written since,
// as on Firestore.
package pgledger

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
)

// Backend is the backend name in the ledger's references.
const Backend = "postgres"

// DefaultProbeTimeout bounds Probe when the caller's context has no earlier
// deadline.
const DefaultProbeTimeout = idempotency.DefaultProbeTimeout

// reserveAttempts bounds Reserve's loop: a row that vanishes between the
// insert and the read (released, resolved) makes it try again; under
// pathological churn it gives up as Unavailable rather than spin.
const reserveAttempts = 8

// recoveryReadTimeout bounds the read after an insert whose answer was lost.
const recoveryReadTimeout = 2 * time.Second

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the ledger's schema history, recorded apart from the
// store's (in stipend_ledger_migrations), so the ledger may share the
// store's database or have its own.
var Migrations = pgmigrate.Embedded("ledger", migrationFiles, "migrations", "stipend_ledger_migrations")

var _ idempotency.Ledger = (*Ledger)(nil)

// Ledger is the PostgreSQL ledger.
type Ledger struct {
	idempotency.Names // Reference and Inspect
	rows              idempotency.Rows
	pool              *pgxpool.Pool
}

// Option configures a Ledger.
type Option = idempotency.RowsOption

// WithClock makes the ledger read time from now instead of time.Now (for
// createdAt, completedAt and expiry checks; update times are the server's).
func WithClock(now func() time.Time) Option { return idempotency.WithRowsClock(now) }

// WithProbeTimeout sets Probe's bound (DefaultProbeTimeout otherwise).
func WithProbeTimeout(d time.Duration) Option { return idempotency.WithRowsProbeTimeout(d) }

// New returns a ledger on pool whose rows belong to collection (use
// idempotency.CollectionName of the deployment namespace). The caller owns
// the pool.
func New(pool *pgxpool.Pool, collection string, opts ...Option) *Ledger {
	l := &Ledger{rows: idempotency.NewRows(Backend, collection, opts...), pool: pool}
	l.Names = l.rows.Names(l.Get)
	return l
}

// clock is the ledger's time as stored: UTC, microseconds.
func (l *Ledger) clock() time.Time { return l.rows.Now().Truncate(time.Microsecond) }

// newNonce returns 128 random bits in hex.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nextUpdate is the update time of a write of a row that exists: the
// server's clock, but strictly after the row's last write.
const nextUpdate = `greatest(clock_timestamp(), updated_at + interval '1 microsecond')`

// Reserve implements idempotency.Ledger.
//
// Each call stores a random nonce in the row it creates. If the insert
// fails without a definite answer (a lost connection after the commit),
// the nonce tells whether the row is this call's own, so the reservation
// is not stranded in progress.
func (l *Ledger) Reserve(ctx context.Context, a idempotency.Attempt) (idempotency.Result, error) {
	if err := a.Validate(); err != nil {
		return idempotency.Result{}, fault.Wrap(fault.CodeInvalid, err, "reserve")
	}
	return l.reserve(ctx, a.Bounded(), newNonce())
}

// reserve is Reserve with the nonce given (tests pass a known one).
func (l *Ledger) reserve(ctx context.Context, a idempotency.Attempt, nonce string) (idempotency.Result, error) {
	for range reserveAttempts {
		now := l.clock()
		// An expired completed row counts as absent: the insert replaces
		// it, in place, so its update time keeps increasing.
		rec, _, err := scan(l.pool.QueryRow(ctx, `INSERT INTO idempotency_ledger AS l (collection, id, route,
				fingerprint, state, operation_id, trace_id, created_at, attempt, updated_at, fenced)
			VALUES ($1, $2, $3, $4, 'in_progress', $5, $6, $7, $8, clock_timestamp(), $9)
			ON CONFLICT (collection, id) DO UPDATE SET route = EXCLUDED.route, fingerprint = EXCLUDED.fingerprint,
				state = 'in_progress', operation_id = EXCLUDED.operation_id, trace_id = EXCLUDED.trace_id,
				created_at = EXCLUDED.created_at, completed_at = NULL, expire_at = NULL, response_status = NULL,
				response_header = NULL, response_body = NULL, attempt = EXCLUDED.attempt,
				fenced = EXCLUDED.fenced, written_at = NULL,
				updated_at = greatest(clock_timestamp(), l.updated_at + interval '1 microsecond')
			WHERE l.state = 'completed' AND l.expire_at <= EXCLUDED.created_at
			RETURNING `+columns, l.rows.Collection(), a.ID, a.Route, a.Fingerprint, a.OperationID, a.TraceID, now, nonce, a.Fenced))
		if err == nil {
			return idempotency.Result{Outcome: idempotency.Reserved, Record: rec}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return l.afterFailedInsert(ctx, a.ID, nonce, err)
		}
		existing, owner, err := l.get(ctx, a.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // released or resolved since our insert: try again
		}
		if err != nil {
			return idempotency.Result{}, pgfault.Read(err, "read %s", l.Reference(a.ID))
		}
		switch {
		case owner == nonce && existing.State == idempotency.StateInProgress:
			return idempotency.Result{Outcome: idempotency.Reserved, Record: existing}, nil
		case existing.Expired(now):
			continue // expired since our insert looked: replace it
		}
		return idempotency.Found(existing, a), nil
	}
	return idempotency.Result{}, fault.Errorf(fault.CodeUnavailable, "reserve %s: the row kept changing; try again", l.Reference(a.ID))
}

// afterFailedInsert reads the row once (on a short context of its own, as
// the caller's may have ended) to learn whether the failed insert committed
// after all. If the row carries nonce, the reservation is ours; otherwise
// the insert's error stands and the request does not run.
func (l *Ledger) afterFailedInsert(ctx context.Context, id, nonce string, insertErr error) (idempotency.Result, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recoveryReadTimeout)
	defer cancel()
	if rec, owner, err := l.get(rctx, id); err == nil && owner == nonce && rec.State == idempotency.StateInProgress {
		return idempotency.Result{Outcome: idempotency.Reserved, Record: rec}, nil
	}
	return idempotency.Result{}, pgfault.Write(insertErr, "reserve %s", l.Reference(id))
}

// Complete implements idempotency.Ledger.
func (l *Ledger) Complete(ctx context.Context, res idempotency.Reservation, resp idempotency.Response, expireAt time.Time) error {
	if err := resp.Check(); err != nil {
		return err
	}
	if err := idempotency.CheckExpiry(expireAt); err != nil {
		return err
	}
	ok, err := l.complete(ctx, res.ID, `attempt = $3 AND state = 'in_progress'`, res.Token, resp, expireAt)
	if err != nil {
		return pgfault.Write(err, "complete %s", l.Reference(res.ID))
	}
	if !ok {
		return fault.Errorf(fault.CodeConflict, "complete %s: the reservation changed or is gone", l.Reference(res.ID))
	}
	return nil
}

// complete stores resp on row id if guard (a condition on $3, which is
// arg) holds, and reports whether it did.
func (l *Ledger) complete(ctx context.Context, id, guard string, arg any, resp idempotency.Response, expireAt time.Time) (bool, error) {
	c := resp.Clone()
	header, err := headerArg(c.Header)
	if err != nil {
		return false, err
	}
	tag, err := l.pool.Exec(ctx, `UPDATE idempotency_ledger SET state = 'completed', response_status = $4,
			response_header = $5, response_body = $6, completed_at = $7, expire_at = $8, updated_at = `+nextUpdate+`
		WHERE collection = $1 AND id = $2 AND `+guard,
		l.rows.Collection(), id, arg, c.Status, header, c.Body, l.clock(), expireAt.UTC())
	return tag.RowsAffected() == 1, err
}

// Release implements idempotency.Ledger.
func (l *Ledger) Release(ctx context.Context, res idempotency.Reservation) error {
	tag, err := l.pool.Exec(ctx, `DELETE FROM idempotency_ledger WHERE collection = $1 AND id = $2 AND attempt = $3
		AND state = 'in_progress' AND written_at IS NULL`, l.rows.Collection(), res.ID, res.Token)
	if err != nil {
		return pgfault.Write(err, "release %s", l.Reference(res.ID))
	}
	if tag.RowsAffected() != 1 {
		return fault.Errorf(fault.CodeConflict, "release %s: the reservation changed, is gone, or its change was written", l.Reference(res.ID))
	}
	return nil
}

// Get implements idempotency.Ledger.
func (l *Ledger) Get(ctx context.Context, id string) (idempotency.Record, error) {
	if !idempotency.ValidID(id) {
		return idempotency.Record{}, fault.Errorf(fault.CodeInvalid, "id: not a hashed key")
	}
	rec, _, err := l.get(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotency.Record{}, fault.Errorf(fault.CodeNotFound, "%s: no such row", l.Reference(id))
	}
	if err != nil {
		return idempotency.Record{}, pgfault.Read(err, "read %s", l.Reference(id))
	}
	return rec, nil
}

// get reads row id and the nonce of the Reserve call that created it;
// pgx.ErrNoRows when absent.
func (l *Ledger) get(ctx context.Context, id string) (idempotency.Record, string, error) {
	return scan(l.pool.QueryRow(ctx, `SELECT `+columns+` FROM idempotency_ledger WHERE collection = $1 AND id = $2`, l.rows.Collection(), id))
}

// Durable implements idempotency.Ledger: PostgreSQL coordinates every
// instance on the database.
func (l *Ledger) Durable() bool { return true }

// Probe implements idempotency.Ledger with a bounded read of at most one
// row's existence: it proves the server answers, the table is there and
// the role may read it, without reading any row's contents.
func (l *Ledger) Probe(ctx context.Context) error {
	return l.rows.Probe(ctx, func(ctx context.Context) error {
		var any bool
		return l.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM idempotency_ledger WHERE collection = $1 LIMIT 1)`, l.rows.Collection()).Scan(&any)
	})
}

// Purge deletes up to limit completed rows of the ledger's collection whose
// results expired before before, and returns how many it deleted. It is
// the ledger's counterpart of Firestore's TTL policy: Reserve never replays
// an expired result anyway, so purging only reclaims space, and an
// in-progress row is never purged.
func (l *Ledger) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, fault.Errorf(fault.CodeInvalid, "limit: must be positive")
	}
	tag, err := l.pool.Exec(ctx, `DELETE FROM idempotency_ledger WHERE (collection, id) IN (
			SELECT collection, id FROM idempotency_ledger
			WHERE state = 'completed' AND expire_at < $2 AND collection = $1 LIMIT $3)`,
		l.rows.Collection(), before.UTC(), limit)
	if err != nil {
		return 0, pgfault.Write(err, "purge %s", l.Reference(""))
	}
	return int(tag.RowsAffected()), nil
}
