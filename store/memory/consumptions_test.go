package memory_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
)

// The conformance suites compare consumptions without their fingerprints,
// which backends store differently; these tests hold the memory store to
// what it keeps: each consumption exactly as charged, fingerprint included.
func TestStore_Consumptions(t *testing.T) {
	t.Run("ReadBackAsCharged", func(t *testing.T) {
		s, credits, quota := consumptionStore(t)
		usd := money.Money{Cents: 5, Currency: "USD"}
		eur := money.Money{Cents: 0, Currency: "EUR"}
		reqs := []entitlement.ConsumeRequest{
			{Service: "search", Tool: "q", IdempotencyKey: "priced", Cost: &usd, EntitlementID: credits},
			{Service: "search", Tool: "q", IdempotencyKey: "unpriced", Units: 3},
			{Service: "search", Tool: "q", IdempotencyKey: "quota with a cost", Cost: &eur, EntitlementID: quota},
			{Service: "search", Tool: "other", IdempotencyKey: strings.Repeat("k", entitlement.MaxKeyLength), Cost: &usd},
		}
		var charged []entitlement.Consumption
		for _, req := range reqs {
			req.AgentID = "agent-1"
			c := consume(t, s, req)
			if c.Fingerprint != req.Fingerprint() {
				t.Errorf("CheckAndConsume(%q): fingerprint %q, want %q", req.IdempotencyKey, c.Fingerprint, req.Fingerprint())
			}
			if u, err := uuid.Parse(c.ID); err != nil || u.Version() != 4 {
				t.Errorf("CheckAndConsume(%q): ID %q, want a version 4 UUID (%v)", req.IdempotencyKey, c.ID, err)
			}
			got, err := s.FindKey(t.Context(), req.AgentID, req.IdempotencyKey)
			if err != nil {
				t.Fatalf("FindKey(%q): %v", req.IdempotencyKey, err)
			}
			if d := cmp.Diff(c, got.Consumption); d != "" || got.Hold.ID != "" {
				t.Errorf("FindKey(%q) = hold %q (want none), consumption (-charged +found):\n%s", req.IdempotencyKey, got.Hold.ID, d)
			}
			charged = append(charged, c)
		}
		list, next, err := s.ListConsumptions(t.Context(), "agent-1", time.Time{}, store.Page{})
		if err != nil || next != "" {
			t.Fatalf("ListConsumptions = next %q, %v; want one page", next, err)
		}
		if d := cmp.Diff(charged, list); d != "" {
			t.Errorf("ListConsumptions (-charged +listed):\n%s", d)
		}
	})
	t.Run("CopiesShareNothing", func(t *testing.T) {
		s, _, _ := consumptionStore(t)
		c := consume(t, s, entitlement.ConsumeRequest{AgentID: "agent-1", Service: "search", Tool: "q", IdempotencyKey: "k"})
		want := *c.RemainingAfter
		*c.RemainingAfter = -1
		found, err := s.GetConsumption(t.Context(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		*found.RemainingAfter = -2
		list, _, err := s.ListConsumptions(t.Context(), "agent-1", time.Time{}, store.Page{})
		if err != nil || len(list) != 1 {
			t.Fatalf("ListConsumptions = %d items, %v; want 1", len(list), err)
		}
		*list[0].RemainingAfter = -3
		again, err := s.FindKey(t.Context(), "agent-1", "k")
		if err != nil {
			t.Fatal(err)
		}
		if got := *again.Consumption.RemainingAfter; got != want {
			t.Errorf("stored remainingAfter = %d after callers changed their copies, want %d", got, want)
		}
	})
}

// consumptionStore returns a store where agent-1 holds a credits entitlement
// and a quota on service "search", and their IDs. Its clock advances a
// second each time it is read, so consumptions list in the order charged.
func consumptionStore(t *testing.T) (s *memory.Store, credits, quota string) {
	t.Helper()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s = memory.New(memory.WithClock(func() time.Time {
		now = now.Add(time.Second)
		return now
	}))
	for _, e := range []entitlement.Entitlement{
		{
			ID: "credits-1", AgentID: "agent-1", Type: entitlement.TypeCredits, Status: entitlement.StatusActive,
			Scope: entitlement.Scope{Service: "search"}, CreatedAt: now,
			Credits: entitlement.Credits{Balance: money.Money{Cents: 100, Currency: "USD"}, Granted: money.Money{Cents: 100, Currency: "USD"}},
		},
		{
			ID: "quota-1", AgentID: "agent-1", Type: entitlement.TypeQuota, Status: entitlement.StatusActive,
			Scope: entitlement.Scope{Service: "search"}, CreatedAt: now,
			Quota: entitlement.Quota{
				Limit: 10, Remaining: 10, Period: entitlement.PeriodDay,
				Anchor: now, ResetAt: entitlement.PeriodDay.NextBoundary(now, now),
			},
		},
	} {
		if _, err := s.CreateEntitlement(t.Context(), e); err != nil {
			t.Fatalf("CreateEntitlement(%s): %v", e.ID, err)
		}
	}
	return s, "credits-1", "quota-1"
}

// consume charges req and returns the consumption.
func consume(t *testing.T, s *memory.Store, req entitlement.ConsumeRequest) entitlement.Consumption {
	t.Helper()
	res, err := s.CheckAndConsume(t.Context(), req)
	if err != nil || res.Outcome != store.Consumed {
		t.Fatalf("CheckAndConsume(%q) = %s %v, %v; want consumed", req.IdempotencyKey, res.Outcome, res.Denials, err)
	}
	return res.Consumption
}
