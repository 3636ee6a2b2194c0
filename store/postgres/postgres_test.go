package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/postgres"
)

// instances is how many stores the concurrency suites run on one database:
// each with its own pool and lanes, as that many processes of Stipend would.
const instances = 4

// migrated returns the pool configuration of a fresh, migrated schema.
func migrated(tb testing.TB) *pgxpool.Config {
	tb.Helper()
	cfg := pgtest.Schema(tb)
	pool := pgtest.Open(tb, cfg, 2)
	if _, err := pgmigrate.Up(tb.Context(), pool, postgres.Migrations); err != nil {
		tb.Fatalf("Migrate: %v", err)
	}
	pool.Close()
	return cfg
}

// open returns n stores on the schema of cfg, each on its own pool.
func open(tb testing.TB, cfg *pgxpool.Config, n int, now func() time.Time) []*postgres.Store {
	tb.Helper()
	out := make([]*postgres.Store, n)
	for i := range out {
		s := postgres.New(pgtest.Open(tb, cfg, 8), postgres.WithClock(now))
		tb.Cleanup(func() { _ = s.Close() }) // before the pool closes: cleanups run last first
		out[i] = s
	}
	return out
}

// newStore returns one store on a fresh schema.
func newStore(t *testing.T, now func() time.Time) store.EntitlementStore {
	return open(t, migrated(t), 1, now)[0]
}

// newFleet returns instances stores on one fresh schema, behind one
// store.EntitlementStore that spreads the calls over them.
func newFleet(t *testing.T, now func() time.Time) store.EntitlementStore {
	return newFleetOf(open(t, migrated(t), instances, now))
}

func newDeliveryStore(t *testing.T, now func() time.Time) store.DeliveryStore {
	return open(t, migrated(t), 1, now)[0]
}

func newDeliveryFleet(t *testing.T, now func() time.Time) store.DeliveryStore {
	return newDeliveryFleetOf(open(t, migrated(t), instances, now))
}

func TestStore_Conformance(t *testing.T) {
	conformance.RunTests(t, newStore)
}

// TestStore_Concurrency runs the concurrency suite on one instance, where
// every hot entitlement's calls coalesce into batches.
func TestStore_Concurrency(t *testing.T) {
	conformance.RunConcurrencyTests(t, newStore, conformance.ConcurrencyOptions{})
}

// TestStore_ConcurrencyAcrossInstances runs it on several instances of the
// store on one database, whose batches contend for the same rows.
func TestStore_ConcurrencyAcrossInstances(t *testing.T) {
	conformance.RunConcurrencyTests(t, newFleet, conformance.ConcurrencyOptions{})
}

// TestStore_Property runs 10 rounds, not the default 30, across instances.
func TestStore_Property(t *testing.T) {
	conformance.RunPropertyTests(t, newFleet, conformance.ConcurrencyOptions{Rounds: 10})
}

func TestDeliveryStore_Conformance(t *testing.T) {
	conformance.RunDeliveryStoreTests(t, newDeliveryStore)
}

func TestDeliveryStore_Concurrency(t *testing.T) {
	conformance.RunDeliveryStoreConcurrencyTests(t, newDeliveryFleet)
}

// TestStore_PingUnreachable checks that Ping fails closed, as Unavailable,
// within the caller's deadline, when no server answers.
func TestStore_PingUnreachable(t *testing.T) {
	pool, err := pgxpool.New(t.Context(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	if err != nil {
		t.Fatalf("pgxpool.New: %v", err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	err = postgres.New(pool).Ping(ctx)
	if got := store.CodeOf(err); got != store.CodeUnavailable {
		t.Errorf("Ping with no server: got %v (code %q), want code %q", err, got, store.CodeUnavailable)
	}
}

// TestStore_InstantsInCommitOrder runs the commit-order suite on two
// stores on one database.
func TestStore_InstantsInCommitOrder(t *testing.T) {
	conformance.RunCommitOrderTests(t, func(t *testing.T, endClock func() time.Time) (store.EntitlementStore, store.EntitlementStore) {
		cfg := migrated(t)
		return open(t, cfg, 1, endClock)[0], open(t, cfg, 1, time.Now)[0]
	})
}

// TestStore_Instances runs the multi-instance suite on n stores, each on
// its own pool, on one schema.
func TestStore_Instances(t *testing.T) {
	conformance.RunInstanceTests(t, func(t *testing.T, n int, now func() time.Time) []store.EntitlementStore {
		var out []store.EntitlementStore
		for _, s := range open(t, migrated(t), n, now) {
			out = append(out, s)
		}
		return out
	}, conformance.InstanceOptions{})
}
