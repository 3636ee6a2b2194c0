package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// TestStore_OneKeyOnTwoEntitlements: two instances charge one key of one
// agent at once, each naming another of the agent's entitlements, so
// neither waits for the other's row lock and both find the key unused: the
// charge whose key (in its one write statement) comes second fails on the
// unique key, starts again and answers a conflict. Exactly one is charged.
func TestStore_OneKeyOnTwoEntitlements(t *testing.T) {
	ctx := context.Background()
	stores := open(t, migrated(t), 2, time.Now)
	usd := func(c int64) *money.Money { return &money.Money{Cents: c, Currency: "USD"} }
	for _, id := range []string{"x", "y"} {
		if _, err := stores[0].CreateEntitlement(ctx, entitlement.Entitlement{ID: id, AgentID: "a", Type: entitlement.TypeCredits,
			Scope: entitlement.Scope{Service: "s"}, Status: entitlement.StatusActive, CreatedAt: time.Now(),
			Credits: entitlement.Credits{Balance: *usd(10_000), Granted: *usd(10_000)}}); err != nil {
			t.Fatal(err)
		}
	}
	const keys = 40
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		var wg sync.WaitGroup
		res := make([]store.ConsumeResult, 2)
		errs := make([]error, 2)
		for i, id := range []string{"x", "y"} {
			wg.Go(func() {
				res[i], errs[i] = stores[i].CheckAndConsume(ctx, entitlement.ConsumeRequest{AgentID: "a", Service: "s", Tool: "t",
					IdempotencyKey: key, Cost: usd(1), EntitlementID: id})
			})
		}
		wg.Wait()
		consumed := 0
		for i := range res {
			if errs[i] != nil {
				t.Fatalf("%s: %v", key, errs[i])
			}
			switch res[i].Outcome {
			case store.Consumed:
				consumed++
			case store.Conflict:
			default:
				t.Fatalf("%s: outcome %s", key, res[i].Outcome)
			}
		}
		if consumed != 1 {
			t.Fatalf("%s: %d charges, want 1", key, consumed)
		}
	}
	var left int64
	for _, id := range []string{"x", "y"} {
		e, err := stores[0].GetEntitlement(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		left += e.Credits.Balance.Cents
	}
	if left != 2*10_000-keys {
		t.Errorf("balances hold %d cents, want %d", left, 2*10_000-keys)
	}
}
