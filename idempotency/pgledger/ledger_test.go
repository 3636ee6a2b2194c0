package pgledger_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/pgledger"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/store"
)

// migrated returns the pool configuration of a fresh schema with the
// ledger's table.
func migrated(tb testing.TB) *pgxpool.Config {
	tb.Helper()
	cfg := pgtest.Schema(tb)
	pool := pgtest.Open(tb, cfg, 2)
	if _, err := pgmigrate.Up(tb.Context(), pool, pgledger.Migrations); err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	pool.Close()
	return cfg
}

// newLedger returns a ledger on a fresh schema.
func newLedger(tb testing.TB, now func() time.Time) *pgledger.Ledger {
	tb.Helper()
	return pgledger.New(pgtest.Open(tb, migrated(tb), 4), idempotency.CollectionName("test"), pgledger.WithClock(now))
}

func newConformanceLedger(t *testing.T, now func() time.Time) idempotency.Ledger {
	return newLedger(t, now)
}

// instances is how many ledgers (each on its own pool) the concurrency
// suite runs on one table, as that many processes of Stipend would.
const instances = 4

// spread is several instances of the ledger on one table: each Reserve
// goes to the next in turn; the rest to the first.
type spread struct {
	*pgledger.Ledger
	all  []*pgledger.Ledger
	next atomic.Uint64
}

func (s *spread) Reserve(ctx context.Context, a idempotency.Attempt) (idempotency.Result, error) {
	return s.all[s.next.Add(1)%uint64(len(s.all))].Reserve(ctx, a)
}

func newSpreadLedger(t *testing.T, now func() time.Time) idempotency.Ledger {
	cfg := migrated(t)
	s := &spread{}
	for range instances {
		s.all = append(s.all, pgledger.New(pgtest.Open(t, cfg, 4), idempotency.CollectionName("test"), pgledger.WithClock(now)))
	}
	s.Ledger = s.all[0]
	return s
}

func TestLedger_Conformance(t *testing.T) {
	conformance.RunLedgerTests(t, newConformanceLedger)
}

func TestLedger_Concurrency(t *testing.T) {
	conformance.RunLedgerConcurrencyTests(t, newSpreadLedger)
}

func TestLedger_Durable(t *testing.T) {
	if !pgledger.New(nil, "c").Durable() {
		t.Errorf("pgledger.Durable() = false, want true")
	}
}

// TestLedger_ProbeUnreachable checks that Probe fails closed, within its
// bound, when the server does not answer.
func TestLedger_ProbeUnreachable(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	defer pool.Close()
	conformance.CheckProbeUnreachable(t, pgledger.New(pool, "idem_probe", pgledger.WithProbeTimeout(500*time.Millisecond)), "server")
}

// TestLedger_ExpireAtOnlyOnCompletedRows checks the column Purge reads:
// NULL while in progress (so a purge never deletes an uncertain write), the
// expiry once completed.
func TestLedger_ExpireAtOnlyOnCompletedRows(t *testing.T) {
	clock := conformance.NewClock()
	cfg := migrated(t)
	pool := pgtest.Open(t, cfg, 2)
	l := pgledger.New(pool, idempotency.CollectionName("test"), pgledger.WithClock(clock.Now))
	ctx := context.Background()
	id := idempotency.HashKey("ns", "route", "k")
	res, err := l.Reserve(ctx, idempotency.Attempt{ID: id, Route: "route", Fingerprint: "f"})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	expireAt := func() *time.Time {
		var t0 *time.Time
		if err := pool.QueryRow(ctx, `SELECT expire_at FROM idempotency_ledger WHERE id = $1`, id).Scan(&t0); err != nil {
			t.Fatalf("reading expire_at: %v", err)
		}
		return t0
	}
	if got := expireAt(); got != nil {
		t.Errorf("in-progress row has expire_at %v; want NULL", got)
	}
	expire := clock.Now().Add(time.Hour)
	if err := l.Complete(ctx, res.Reservation(), idempotency.Response{Status: 200, Body: []byte("{}")}, expire); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got := expireAt(); got == nil || !got.Equal(expire) {
		t.Errorf("completed row: expire_at = %v, want %v", got, expire)
	}
}

// TestLedger_Purge deletes expired completed rows only: never an
// in-progress row, never a result still replayed, never another
// collection's.
func TestLedger_Purge(t *testing.T) {
	clock := conformance.NewClock()
	cfg := migrated(t)
	pool := pgtest.Open(t, cfg, 2)
	l := pgledger.New(pool, idempotency.CollectionName("a"), pgledger.WithClock(clock.Now))
	other := pgledger.New(pool, idempotency.CollectionName("b"), pgledger.WithClock(clock.Now))
	ctx := context.Background()
	reserve := func(l *pgledger.Ledger, key string, expire time.Duration) string {
		t.Helper()
		id := idempotency.HashKey("ns", "route", key)
		res, err := l.Reserve(ctx, idempotency.Attempt{ID: id, Route: "route", Fingerprint: "f"})
		if err != nil {
			t.Fatalf("Reserve(%s): %v", key, err)
		}
		if expire > 0 {
			if err := l.Complete(ctx, res.Reservation(), idempotency.Response{Status: 201}, clock.Now().Add(expire)); err != nil {
				t.Fatalf("Complete(%s): %v", key, err)
			}
		}
		return id
	}
	old := reserve(l, "old", time.Minute)
	fresh := reserve(l, "fresh", 2*time.Hour)
	held := reserve(l, "held", 0)
	otherOld := reserve(other, "old", time.Minute)
	n, err := l.Purge(ctx, clock.Now().Add(time.Hour), 100)
	if err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1 row (the expired result)", n, err)
	}
	if _, err := l.Get(ctx, old); store.CodeOf(err) != store.CodeNotFound {
		t.Errorf("Get(purged row) = %v, want not found", err)
	}
	for _, id := range []string{fresh, held} {
		if _, err := l.Get(ctx, id); err != nil {
			t.Errorf("Get(%s) after Purge: %v, want the row kept", id, err)
		}
	}
	if _, err := other.Get(ctx, otherOld); err != nil {
		t.Errorf("another collection's expired row after Purge: %v, want it kept", err)
	}
}
