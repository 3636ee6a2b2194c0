// Package postgres is the production store on PostgreSQL (13 or later; the
// tests run 15), through pgx v5 and its pool. Every instance of Stipend may
// share one database: all invariants are enforced by PostgreSQL
// transactions, row locks and unique keys, not by process memory.
//
// The schema is the versioned SQL migrations embedded in this package
// (migrations/), applied by Migrate (pressly/goose) at start or by
// `stipend migrate`. Tables live in the schema the pool's connections use
// (their search_path), so several deployments can share a database.
//
//	accounts           agent ID
//	entitlements       entitlement ID; its open holds in the holds column
//	consumptions       consumption ID
//	holds              hold ID
//	charge_keys        (agent, idempotency key) → the consumption or hold: the double-charge guard
//	payments           payment ID; unique idempotency key and provider intent
//	receipts           receipt ID
//	events             event ID: the outbox
//	inbound_events     (source, event ID): inbound provider events
//	webhook_endpoints  endpoint ID
//	deliveries         delivery ID; unique caller key
//
// Transactions run at READ COMMITTED and take the row locks they need
// (SELECT … FOR UPDATE), so they wait for each other instead of failing;
// a deadlock or serialization failure the server breaks is retried. A
// consume whose agent has no other call in flight on the instance is one
// transaction of two round trips (alone.go); charges of a busy entitlement
// are coalesced per instance (store/internal/coalesce): one transaction, and
// one lock of the entitlement row, per batch of calls.
package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/coalesce"
	"github.com/stipend-mcp/stipend/store/internal/ops"
)

var (
	_ store.EntitlementStore = (*Store)(nil)
	_ store.DeliveryStore    = (*Store)(nil)
)

// Store is the PostgreSQL adapter.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	// shared is the methods off the hot path (package ops) on this
	// store's unit of work (unit.go).
	shared

	// lanes queues the charges of each entitlement (store/internal/coalesce).
	lanes *coalesce.Lanes[op, opResult]
	// callers counts the consumes and holds in flight per agent (alone.go).
	callers callers
	// maxBatch bounds the calls one charge transaction applies; gather is
	// how long a hot lane waits for its callers to come back.
	maxBatch int
	gather   time.Duration
	// retryBudget bounds how long one transaction is retried under
	// contention.
	retryBudget time.Duration
	// recent is what the agents' last guarded charges wrote (guarded.go).
	recent recent
	// beforeGuardedWrite, set by tests only, runs between a guarded
	// consume's read and its write (guarded.go).
	beforeGuardedWrite func()
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store read time from now instead of time.Now. Every
// instant the store records comes from it, never from the server's clock.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithMaxBatch bounds how many concurrent calls on one entitlement are
// applied in one transaction (default 100; 1 turns coalescing off, so each
// call is a transaction of its own that waits for the row lock).
func WithMaxBatch(n int) Option {
	return func(s *Store) {
		if n >= 1 && n <= 1000 {
			s.maxBatch = n
		}
	}
}

// New returns a store on pool, whose schema Migrate has brought up to date.
// The caller owns the pool (its size bounds the store's concurrent
// transactions and reads).
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool, now: time.Now, maxBatch: 100, gather: 200 * time.Microsecond, retryBudget: 20 * time.Second}
	for _, o := range opts {
		o(s)
	}
	s.recent = newRecent()
	s.lanes = coalesce.New(s.applyBatch, coalesce.Options[op]{MaxBatch: s.maxBatch, Gather: s.gather, Budget: s.retryBudget, What: op.what})
	s.shared = ops.New(s.unit)
	return s
}

// clock returns the current time as stored: UTC, microsecond precision
// (PostgreSQL keeps no finer timestamps).
//
// A transaction that changes an entitlement reads the clock only once it holds the
// entitlement's row lock: a transaction that committed first then committed
// before the lock was granted, so an instant read after it is later, and
// the audit trail (occurredAt, revokedAt, issuedAt) reads in commit order
// (on one clock; across instances, within their clocks' skew). Read before
// the lock, the instant would predate the wait, during which conflicting
// transactions commit later instants (RunCommitOrderTests shows it).
func (s *Store) clock() time.Time { return stamp(s.now()) }

// stamp normalises an instant to what PostgreSQL stores.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Ping implements store.EntitlementStore: one read, bounded by ctx, of at
// most one row's existence, which proves the server answers, the schema is
// there and the role may read it.
func (s *Store) Ping(ctx context.Context) error {
	var any bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM accounts LIMIT 1)").Scan(&any); err != nil {
		return pgfault.Read(err, "ping")
	}
	return nil
}

// Close implements store.EntitlementStore: it refuses new charges and
// waits for the charges in flight and the batches already queued. The pool stays open: its owner
// closes it after.
func (s *Store) Close() error {
	s.callers.close()
	s.lanes.Close()
	return nil
}
