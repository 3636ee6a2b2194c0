package conformance

import (
	"context"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

var consumeTests = []subtest{
	{"ConsumeCredits", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		req := request(agent, "call-1", 250)
		res := mustConsume(t, s, req)
		want := entitlement.Consumption{
			ID: res.Consumption.ID, AgentID: agent, EntitlementID: e.ID, EntitlementType: entitlement.TypeCredits,
			Service: testService, Tool: testTool, IdempotencyKey: "call-1", Cost: usd(250), Units: 1,
			OccurredAt: clock.Now(), BalanceAfter: usd(750),
		}
		if d := cmpDiff(want, res.Consumption); d != "" || want.ID == "" {
			t.Errorf("consumption mismatch (-want +got):\n%s", d)
		}
		wantE := e
		wantE.Credits.Balance = usd(750)
		wantEntitlement(t, s, "CheckAndConsume", wantE, res.Entitlement)
	}},
	{"ConsumeReplay", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		req := request(agent, "call-1", 250)
		first := mustConsume(t, s, req)
		clock.Advance(1e9)
		again := checkAndConsume(t, s, req)
		if again.Outcome != store.Replay || again.Consumption.ID == "" {
			t.Fatalf("second CheckAndConsume = %s, want %s with the consumption", again.Outcome, store.Replay)
		}
		if d := cmpDiff(first.Consumption, again.Consumption); d != "" {
			t.Errorf("replayed consumption differs from the original (-want +got):\n%s", d)
		}
		if got := getEntitlement(t, s, e.ID).Credits.Balance; got != usd(750) {
			t.Errorf("balance after a replay = %v, want 750 USD (charged once)", got)
		}
	}},
	{"ConsumeConflict", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		mustConsume(t, s, request(agent, "call-1", 250))
		variants := map[string]entitlement.ConsumeRequest{
			"cost":  request(agent, "call-1", 300),
			"tool":  func() entitlement.ConsumeRequest { r := request(agent, "call-1", 250); r.Tool = "other"; return r }(),
			"units": func() entitlement.ConsumeRequest { r := request(agent, "call-1", 250); r.Units = 2; return r }(),
			"entitlementId": func() entitlement.ConsumeRequest {
				r := request(agent, "call-1", 250)
				r.EntitlementID = e.ID
				return r
			}(),
		}
		for name, req := range variants {
			res := checkAndConsume(t, s, req)
			if res.Outcome != store.Conflict || res.Consumption.ID != "" {
				t.Errorf("CheckAndConsume(same key, different %s) = %s (consumption %v), want %s and no consumption", name, res.Outcome, res.Consumption, store.Conflict)
			}
		}
		if got := getEntitlement(t, s, e.ID).Credits.Balance; got != usd(750) {
			t.Errorf("balance after conflicts = %v, want 750 USD", got)
		}
	}},
	{"ConsumeReplayCoversTheWholeRequest", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		// Parameters the consumption itself does not show (a quota call's
		// cost, the entitlement a request named) still decide replay or
		// conflict, through CheckAndConsume and through Check alike.
		agent := newAgent()
		q := createEntitlement(t, s, quota(agent, 10, clock.Now()))
		withCost := request(agent, "priced", 5)
		withCost.Cost.Currency = "EUR"
		named := request(agent, "named", 0)
		named.Cost, named.EntitlementID = nil, q.ID
		mustConsume(t, s, withCost)
		mustConsume(t, s, named)
		variant := func(r entitlement.ConsumeRequest, f func(*entitlement.ConsumeRequest)) entitlement.ConsumeRequest {
			if r.Cost != nil {
				r.Cost = ptr(*r.Cost) // f may change it; withCost keeps its own
			}
			f(&r)
			return r
		}
		cases := []struct {
			name string
			req  entitlement.ConsumeRequest
			want store.Outcome
		}{
			{"same priced call", variant(withCost, func(*entitlement.ConsumeRequest) {}), store.Replay},
			{"priced call without its cost", variant(withCost, func(r *entitlement.ConsumeRequest) { r.Cost = nil }), store.Conflict},
			{"priced call, other amount", variant(withCost, func(r *entitlement.ConsumeRequest) { r.Cost.Cents = 6 }), store.Conflict},
			{"priced call, other currency", variant(withCost, func(r *entitlement.ConsumeRequest) { r.Cost.Currency = "USD" }), store.Conflict},
			{"priced call naming the entitlement", variant(withCost, func(r *entitlement.ConsumeRequest) { r.EntitlementID = q.ID }), store.Conflict},
			{"same named call", variant(named, func(*entitlement.ConsumeRequest) {}), store.Replay},
			{"named call naming none", variant(named, func(r *entitlement.ConsumeRequest) { r.EntitlementID = "" }), store.Conflict},
			{"named call, other service", variant(named, func(r *entitlement.ConsumeRequest) { r.Service = "other" }), store.Conflict},
		}
		for _, tc := range cases {
			for op, call := range map[string]func(context.Context, entitlement.ConsumeRequest) (store.ConsumeResult, error){
				"CheckAndConsume": s.CheckAndConsume, "Check": s.Check,
			} {
				res, err := call(t.Context(), tc.req)
				if err != nil || res.Outcome != tc.want {
					t.Errorf("%s(%s) = %s, %v; want %s", op, tc.name, res.Outcome, err, tc.want)
				}
			}
		}
		if got := getEntitlement(t, s, q.ID).Quota.Remaining; got != 8 {
			t.Errorf("quota remaining = %d, want 8 (two calls charged once each)", got)
		}
	}},
	{"ConsumeQuotaLastUnit", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		q := createEntitlement(t, s, quota(agent, 3, clock.Now()))
		req := request(agent, "all", 0)
		req.Cost, req.Units = nil, 3
		res := mustConsume(t, s, req)
		if res.Consumption.RemainingAfter == nil || *res.Consumption.RemainingAfter != 0 || res.Consumption.Units != 3 {
			t.Errorf("consumption = units %d, remainingAfter %v; want 3 and 0", res.Consumption.Units, res.Consumption.RemainingAfter)
		}
		if res.Entitlement.Quota.Remaining != 0 {
			t.Errorf("entitlement remaining = %d, want 0", res.Entitlement.Quota.Remaining)
		}
		next := request(agent, "one-more", 0)
		next.Cost = nil
		wantDenied(t, s, next, entitlement.Denial{EntitlementID: q.ID, Reason: entitlement.ReasonQuotaExhausted})
	}},
	{"ConsumeQuotaLazyReset", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		q := createEntitlement(t, s, quota(agent, 2, clock.Now()))
		mustConsume(t, s, request(agent, "a", 0))
		mustConsume(t, s, request(agent, "b", 0))
		wantDenied(t, s, request(agent, "c", 0), entitlement.Denial{EntitlementID: q.ID, Reason: entitlement.ReasonQuotaExhausted})
		clock.Set(q.Quota.ResetAt) // a boundary exactly at now has passed
		now := clock.Advance(3 * 24 * 60 * 60 * 1e9)
		res := mustConsume(t, s, request(agent, "c", 0))
		wantReset := entitlement.PeriodDay.NextBoundary(q.Quota.Anchor, now)
		if got := res.Consumption.RemainingAfter; got == nil || *got != 1 {
			t.Errorf("remainingAfter after the lazy reset = %v, want 1", got)
		}
		if got := res.Entitlement.Quota; got.Remaining != 1 || !got.ResetAt.Equal(wantReset) {
			t.Errorf("quota after the lazy reset = remaining %d, resetAt %v; want 1, %v (missed periods skipped)", got.Remaining, got.ResetAt, wantReset)
		}
		stored := getEntitlement(t, s, q.ID)
		if stored.Quota.Remaining != 1 || !stored.Quota.ResetAt.Equal(wantReset) {
			t.Errorf("stored quota = remaining %d, resetAt %v; want 1, %v", stored.Quota.Remaining, stored.Quota.ResetAt, wantReset)
		}
	}},
	{"ConsumeSameKeyTwoAgents", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		a, b := newAgent(), newAgent()
		ea := createEntitlement(t, s, credits(a, 100, clock.Now()))
		eb := createEntitlement(t, s, credits(b, 100, clock.Now()))
		ra := mustConsume(t, s, request(a, "1", 10))
		rb := mustConsume(t, s, request(b, "1", 20))
		if ra.Consumption.EntitlementID != ea.ID || rb.Consumption.EntitlementID != eb.ID || ra.Consumption.ID == rb.Consumption.ID {
			t.Errorf("key \"1\" for two agents: consumptions %+v and %+v, want one on each agent's entitlement", ra.Consumption, rb.Consumption)
		}
	}},
	{"ConsumeKeyShapes", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, _ := agentWithCredits(t, s, 1000, clock.Now())
		keys := []string{"a/b/c", "with spaces ", "..", "__x__", "%2F?#[]*~", strings.Repeat("k", entitlement.MaxKeyLength), "/"}
		for i, key := range keys {
			req := request(agent, key, int64(i+1))
			res := mustConsume(t, s, req)
			if res.Consumption.IdempotencyKey != key {
				t.Errorf("key %q stored as %q", key, res.Consumption.IdempotencyKey)
			}
			if again := checkAndConsume(t, s, req); again.Outcome != store.Replay {
				t.Errorf("CheckAndConsume(key %q) again = %s, want %s", key, again.Outcome, store.Replay)
			}
		}
	}},
	{"ConsumeInvalidRequest", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		bad := map[string]entitlement.ConsumeRequest{
			"empty key":    request(agent, "", 1),
			"long key":     request(agent, strings.Repeat("k", entitlement.MaxKeyLength+1), 1),
			"negative":     request(agent, "k", -1),
			"no service":   func() entitlement.ConsumeRequest { r := request(agent, "k", 1); r.Service = ""; return r }(),
			"control char": request(agent, "k\n", 1),
		}
		for name, req := range bad {
			_, err := s.CheckAndConsume(t.Context(), req)
			wantCode(t, "CheckAndConsume("+name+")", err, store.CodeInvalid)
		}
		if got := getEntitlement(t, s, e.ID).Credits.Balance; got != usd(1000) {
			t.Errorf("balance after invalid requests = %v, want 1000 USD", got)
		}
	}},
	{"ConsumeExplicitEntitlement", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		createEntitlement(t, s, subscription(agent, clock.Now()))
		c := createEntitlement(t, s, credits(agent, 100, clock.Now()))
		req := request(agent, "k", 40)
		req.EntitlementID = c.ID
		res := mustConsume(t, s, req)
		if res.Consumption.EntitlementID != c.ID || res.Entitlement.Credits.Balance != usd(60) {
			t.Errorf("explicit entitlementId: charged %s to balance %v, want %s to 60 USD", res.Consumption.EntitlementID, res.Entitlement.Credits.Balance, c.ID)
		}
	}},
}

// wantDenied consumes req and fails unless it is denied with exactly want
// (in any order), with nothing charged.
func wantDenied(t *testing.T, s store.EntitlementStore, req entitlement.ConsumeRequest, want ...entitlement.Denial) {
	t.Helper()
	consumeAnswer(req, checkAndConsume(t, s, req)).wantDenied(t, want)
}
