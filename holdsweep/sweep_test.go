package holdsweep_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/holdsweep"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store/memory"
)

// holds makes n open holds of 1 cent on n entitlements of one agent.
func holds(t *testing.T, st *memory.Store, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		e, err := st.CreateEntitlement(t.Context(), entitlement.Entitlement{
			ID: fmt.Sprintf("e%d", i), AgentID: "a", Type: entitlement.TypeCredits,
			Scope:   entitlement.Scope{Service: "s", Tools: []string{fmt.Sprintf("t%d", i)}},
			Credits: entitlement.Credits{Balance: money.Money{Cents: 10, Currency: "USD"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Authorize(t.Context(), entitlement.HoldRequest{
			ConsumeRequest: entitlement.ConsumeRequest{AgentID: "a", Service: "s", Tool: e.Scope.Tools[0],
				IdempotencyKey: fmt.Sprintf("k%d", i), Cost: &money.Money{Cents: 1, Currency: "USD"}},
			TTL: time.Minute,
		})
		if err != nil || res.Outcome != "held" {
			t.Fatalf("Authorize = %+v, %v", res, err)
		}
		ids[i] = res.Hold.ID
	}
	return ids
}

func TestOnce(t *testing.T) {
	clock := conformance.NewClock()
	st := memory.New(memory.WithClock(clock.Now))
	// More entitlements than one batch: Once goes on until the store is clean.
	ids := holds(t, st, holdsweep.Batch+20)
	if n, err := holdsweep.Once(t.Context(), st); err != nil || n != 0 {
		t.Fatalf("Once before expiry = %d, %v; want 0, nil", n, err)
	}
	clock.Advance(time.Minute)
	if n, err := holdsweep.Once(t.Context(), st); err != nil || n != len(ids) {
		t.Fatalf("Once after expiry = %d, %v; want %d, nil", n, err, len(ids))
	}
	if n, err := holdsweep.Once(t.Context(), st); err != nil || n != 0 {
		t.Errorf("second Once = %d, %v; want 0: a hold ends once", n, err)
	}
	for _, id := range ids {
		h, err := st.GetHold(t.Context(), id)
		if err != nil || h.Status != entitlement.HoldExpired {
			t.Fatalf("GetHold(%s) = %s, %v; want expired", id, h.Status, err)
		}
	}
}

func TestRun_StopsWithItsContext(t *testing.T) {
	clock := conformance.NewClock()
	st := memory.New(memory.WithClock(clock.Now))
	ids := holds(t, st, 1)
	clock.Advance(time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		holdsweep.Run(ctx, st, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	for {
		h, err := st.GetHold(t.Context(), ids[0])
		if err != nil {
			t.Fatal(err)
		}
		// Refresh shows an expired hold as expired before any sweep; the
		// entitlement's registry tells whether the sweep ended it.
		e, err := st.GetEntitlement(t.Context(), h.EntitlementID)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Holds) == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}
