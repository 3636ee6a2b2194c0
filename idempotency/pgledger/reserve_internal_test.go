package pgledger

import (
	"context"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/internal/pgtest"
)

// TestReserve_OwnCommittedInsertIsOurs covers an insert that committed but
// whose answer was lost: the row already carries this call's nonce, so
// reserve must return Reserved (with the row's update time), not
// InProgress, or the key would be stranded until an operator cleared it.
// It is an internal test because only the package knows the nonce.
func TestReserve_OwnCommittedInsertIsOurs(t *testing.T) {
	ctx := context.Background()
	cfg := pgtest.Schema(t)
	pool := pgtest.Open(t, cfg, 2)
	if _, err := pgmigrate.Up(ctx, pool, Migrations); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	l := New(pool, idempotency.CollectionName("test"))
	a := idempotency.Attempt{ID: idempotency.HashKey("ns", "r", "k"), Route: "r", Fingerprint: "f", OperationID: "op"}
	const nonce = "0123456789abcdef0123456789abcdef"
	var updated time.Time
	if err := pool.QueryRow(ctx, `INSERT INTO idempotency_ledger (collection, id, route, fingerprint, state,
		operation_id, created_at, attempt, updated_at) VALUES ($1, $2, $3, $4, 'in_progress', $5, $6, $7, clock_timestamp())
		RETURNING updated_at`, l.rows.Collection(), a.ID, a.Route, a.Fingerprint, a.OperationID, time.Now(), nonce).Scan(&updated); err != nil {
		t.Fatalf("insert: %v", err)
	}
	got, err := l.reserve(ctx, a, nonce)
	if err != nil {
		t.Fatalf("reserve with the row's own nonce: %v", err)
	}
	if got.Outcome != idempotency.Reserved || !got.Record.UpdateTime.Equal(updated) {
		t.Fatalf("reserve = %s at %v, want reserved at %v", got.Outcome, got.Record.UpdateTime, updated)
	}
	if err := l.Complete(ctx, got.Reservation(), idempotency.Response{Status: 200}, time.Now().Add(time.Hour)); err != nil {
		t.Errorf("Complete with the recovered reservation: %v", err)
	}
	other, err := l.reserve(ctx, a, "another-call")
	if err != nil || other.Outcome != idempotency.Replay {
		t.Errorf("reserve by another call = %s, %v; want replay", other.Outcome, err)
	}
}
