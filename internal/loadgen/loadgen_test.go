package loadgen_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/loadgen"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store/memory"
)

// TestDrive checks that every index runs exactly once, failures are counted
// with the first error kept, and a cancelled context runs nothing.
func TestDrive(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	l := loadgen.Drive(t.Context(), 8, 100, func(_ context.Context, i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		if i%10 == 0 {
			return errors.New("tenth")
		}
		return nil
	})
	if l.OK != 90 || l.Failed != 10 || l.FirstErr != "tenth" || len(l.Latencies) != 100 {
		t.Errorf("Drive = ok %d, failed %d, first error %q, %d latencies; want 90, 10, \"tenth\", 100", l.OK, l.Failed, l.FirstErr, len(l.Latencies))
	}
	for i := range 100 {
		if seen[i] != 1 {
			t.Errorf("index %d ran %d times, want once", i, seen[i])
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if l := loadgen.Drive(ctx, 4, 10, func(context.Context, int) error { return nil }); l.OK+l.Failed != 0 {
		t.Errorf("Drive on a cancelled context ran %d calls, want none", l.OK+l.Failed)
	}
}

// TestCheckBalances checks, on the memory store, that a balance matching
// the stored charges is exact and one that does not is reported.
func TestCheckBalances(t *testing.T) {
	s := memory.New()
	const agent = "agent-bench"
	e, err := s.CreateEntitlement(t.Context(), entitlement.Entitlement{
		ID: "e1", AgentID: agent, Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"},
		Credits: entitlement.Credits{Balance: money.Money{Cents: 100, Currency: "USD"}, Granted: money.Money{Cents: 100, Currency: "USD"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CheckAndConsume(t.Context(), entitlement.ConsumeRequest{AgentID: agent, Service: "search", Tool: "web",
		IdempotencyKey: "k1", Cost: &money.Money{Cents: 30, Currency: "USD"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := loadgen.CheckBalances(t.Context(), s, agent, []string{e.ID}, 100); err != nil || got != "exact" {
		t.Errorf("CheckBalances after one charge of 30 from 100 = %q, %v; want exact", got, err)
	}
	if got, err := loadgen.CheckBalances(t.Context(), s, agent, []string{e.ID}, 90); err != nil || !strings.HasPrefix(got, "WRONG") {
		t.Errorf("CheckBalances against a wrong initial balance = %q, %v; want WRONG", got, err)
	}
}
