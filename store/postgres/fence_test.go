package postgres_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/pgledger"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/store/postgres"
)

// TestStore_Fencing runs the fencing suite on the PostgreSQL store and the
// PostgreSQL ledger on one pool: the change's transaction marks the
// ledger's row, which locks it against the reclaim's guarded delete.
func TestStore_Fencing(t *testing.T) {
	conformance.RunFenceTests(t, func(t *testing.T, now func() time.Time) conformance.Fenced {
		cfg := migrated(t)
		pool := pgtest.Open(t, cfg, 8)
		if _, err := pgmigrate.Up(t.Context(), pool, pgledger.Migrations); err != nil {
			t.Fatalf("Migrate the ledger: %v", err)
		}
		return conformance.Fenced{
			Store:  postgres.New(pool, postgres.WithClock(now)),
			Ledger: pgledger.New(pool, idempotency.CollectionName("test"), pgledger.WithClock(now)),
		}
	})
}
