package api_test

import (
	"testing"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/pgledger"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	pgstore "github.com/stipend-mcp/stipend/store/postgres"
)

// newPostgresEnv is newEnv on the PostgreSQL store (a fresh, migrated
// schema of its own), with the PostgreSQL ledger on the same pool, whose
// fences the store checks, as `stipend serve` wires them. Without a server
// (scripts/test starts one) it skips, or fails under CI=true.
func newPostgresEnv(t *testing.T) *env {
	t.Helper()
	pool := pgtest.Open(t, pgtest.Schema(t), 8)
	for _, set := range []pgmigrate.Set{pgstore.Migrations, pgledger.Migrations} {
		if _, err := pgmigrate.Up(t.Context(), pool, set); err != nil {
			t.Fatalf("migrating %s: %v", set.Name, err)
		}
	}
	ledger := pgledger.New(pool, idempotency.CollectionName("api-test"))
	e := newEnvLedger(t, ledger, idempotency.Options{Namespace: "api-test", Development: true, Fenced: true}, func(c *api.Config) {
		st := pgstore.New(pool, pgstore.WithClock(c.Now))
		c.Store = st
		c.Webhooks.Deliveries = st
	})
	e.autoKey = true
	return e
}
