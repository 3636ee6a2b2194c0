package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/postgres"
)

// TestSessionTimeouts: a transaction left idle while it holds an
// entitlement's row lock (what an instance frozen mid-transaction leaves)
// holds up that entitlement only until the server ends it
// (idle_in_transaction_session_timeout); meanwhile a consume answers
// unavailable at lock_timeout instead of waiting out its deadline, and
// afterwards it is charged.
func TestSessionTimeouts(t *testing.T) {
	cfg := migrated(t)
	postgres.SessionTimeouts(cfg, 200*time.Millisecond, time.Second)
	pool := pgtest.Open(t, cfg, 4)
	st := postgres.New(pool)
	ctx := context.Background()

	var lock, idle string
	if err := pool.QueryRow(ctx, "SELECT current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&lock, &idle); err != nil {
		t.Fatal(err)
	}
	if lock != "200ms" || idle != "1s" {
		t.Fatalf("a pooled connection's lock_timeout, idle_in_transaction_session_timeout = %q, %q; want 200ms, 1s", lock, idle)
	}

	ent := createCredits(t, st, "agent-frozen", 100)
	// The frozen instance: its transaction locked the row and says nothing more.
	frozen, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := frozen.Exec(ctx, "SELECT 1 FROM entitlements WHERE id = $1 FOR UPDATE", ent.ID); err != nil {
		t.Fatal(err)
	}
	consume := func(key string) error {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err := st.CheckAndConsume(cctx, entitlement.ConsumeRequest{AgentID: "agent-frozen", Service: "search", Tool: "t",
			IdempotencyKey: key, Cost: new(usd(1))})
		return err
	}
	err = consume("while-frozen")
	if store.CodeOf(err) != store.CodeUnavailable || pgfault.State(err) != "55P03" {
		t.Fatalf("consume while the row is locked: %v (state %q); want unavailable by lock_timeout (55P03)", err, pgfault.State(err))
	}
	// The server ends the idle transaction; the entitlement is usable again.
	deadline := time.Now().Add(30 * time.Second)
	for err = consume("after-frozen"); err != nil; err = consume("after-frozen") {
		if store.CodeOf(err) != store.CodeUnavailable || time.Now().After(deadline) {
			t.Fatalf("consume after the idle transaction should have ended: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := frozen.Commit(ctx); err == nil {
		t.Error("the frozen transaction committed after the server ended its session; want an error")
	}
}
