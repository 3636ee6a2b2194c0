package conformance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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
		agent, q := agentWithQuota(t, s, 10, clock.Now())
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
		agent, q := agentWithQuota(t, s, 3, clock.Now())
		res := mustConsume(t, s, unitsRequest(agent, "all", 3))
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
		agent, q := agentWithQuota(t, s, 2, clock.Now())
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

var selectionTests = []subtest{
	{"SelectSubscriptionQuotaCredits", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, c, q := subscriptionFirst(t, s, clock.Now(), "CheckAndConsume", func(agent, key string) string {
			return mustConsume(t, s, request(agent, key, 10)).Consumption.EntitlementID
		})
		if got := mustConsume(t, s, request(agent, "2", 10)).Consumption.EntitlementID; got != q.ID {
			t.Errorf("pick without the subscription = %s, want the quota %s", got, q.ID)
		}
		res := mustConsume(t, s, request(agent, "3", 10)) // the quota is used up
		if res.Consumption.EntitlementID != c.ID || res.Consumption.BalanceAfter != usd(990) {
			t.Errorf("pick after the quota = %s (balance %v), want the credits %s (990 USD)", res.Consumption.EntitlementID, res.Consumption.BalanceAfter, c.ID)
		}
	}},
	{"SelectEarliestExpiry", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		now := clock.Now()
		never := createEntitlement(t, s, credits(agent, 10, now.Add(-3*time.Hour)))
		late := credits(agent, 10, now.Add(-2*time.Hour))
		late.ExpiresAt = ptr(now.Add(48 * time.Hour))
		late = createEntitlement(t, s, late)
		soon := credits(agent, 10, now.Add(-time.Hour))
		soon.ExpiresAt = ptr(now.Add(time.Hour))
		soon = createEntitlement(t, s, soon)
		for i, want := range []string{soon.ID, late.ID, never.ID} {
			res := mustConsume(t, s, request(agent, string(rune('a'+i)), 10))
			if res.Consumption.EntitlementID != want {
				t.Errorf("call %d charged %s, want %s (earliest expiry first, none last)", i, res.Consumption.EntitlementID, want)
			}
		}
	}},
	{"SelectOldest", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		now := clock.Now()
		newer := createEntitlement(t, s, credits(agent, 10, now))
		older := createEntitlement(t, s, credits(agent, 10, now.Add(-time.Minute)))
		for i, want := range []string{older.ID, newer.ID} {
			res := mustConsume(t, s, request(agent, string(rune('a'+i)), 10))
			if res.Consumption.EntitlementID != want {
				t.Errorf("call %d charged %s, want %s (oldest first)", i, res.Consumption.EntitlementID, want)
			}
		}
		wantDenied(t, s, request(agent, "c", 10),
			entitlement.Denial{EntitlementID: older.ID, Reason: entitlement.ReasonInsufficientBalance},
			entitlement.Denial{EntitlementID: newer.ID, Reason: entitlement.ReasonInsufficientBalance})
	}},
	{"SelectSkipsRefusing", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		now := clock.Now()
		eur := credits(agent, 1000, now.Add(-time.Hour))
		eur.Credits.Balance.Currency, eur.Credits.Granted.Currency = "EUR", "EUR"
		createEntitlement(t, s, eur)
		usdOK := createEntitlement(t, s, credits(agent, 1000, now))
		res := mustConsume(t, s, request(agent, "k", 5))
		if res.Consumption.EntitlementID != usdOK.ID {
			t.Errorf("charged %s, want %s (the EUR credits refuse a USD cost)", res.Consumption.EntitlementID, usdOK.ID)
		}
	}},
}

var checkTests = []subtest{
	{"CheckAnswerIsACopy", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		// Every result is a copy: changing what Check or CheckAndConsume
		// returned never changes the stored entitlement.
		agent := newAgent()
		e := credits(agent, 100, clock.Now())
		e.Scope.Tools = []string{testTool}
		e.Metadata = map[string]string{"plan": "pro"}
		e.ExpiresAt = ptr(clock.Now().Add(time.Hour))
		e = createEntitlement(t, s, e)
		check, err := s.Check(t.Context(), request(agent, "k", 1))
		if err != nil || check.Outcome != store.Allowed {
			t.Fatalf("Check = %s, %v; want %s", check.Outcome, err, store.Allowed)
		}
		charged := mustConsume(t, s, request(agent, "k", 1))
		for _, got := range []*entitlement.Entitlement{&check.Entitlement, &charged.Entitlement} {
			got.Scope.Tools[0] = "other"
			got.Metadata["plan"] = "changed"
			*got.ExpiresAt = got.ExpiresAt.Add(-2 * time.Hour)
		}
		stored := getEntitlement(t, s, e.ID)
		if stored.Scope.Tools[0] != testTool || stored.Metadata["plan"] != "pro" || !stored.ExpiresAt.Equal(*e.ExpiresAt) {
			t.Errorf("changing returned results changed the stored entitlement: tools %v, metadata %v, expiresAt %v",
				stored.Scope.Tools, stored.Metadata, stored.ExpiresAt)
		}
	}},
	{"CheckNeverWrites", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 100, clock.Now())
		req := request(agent, "k", 60)
		for range 2 {
			res, err := s.Check(t.Context(), req)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if res.Outcome != store.Allowed || res.Entitlement.ID != e.ID || res.Consumption.ID != "" {
				t.Fatalf("Check = %s %+v, want %s by %s and no consumption", res.Outcome, res.Denials, store.Allowed, e.ID)
			}
		}
		if d := cmpDiff(e, getEntitlement(t, s, e.ID)); d != "" {
			t.Errorf("Check changed the entitlement (-want +got):\n%s", d)
		}
		wantNoConsumptions(t, s, agent, "Check")
		// The key is still unused: the real call is charged, not replayed.
		mustConsume(t, s, req)
		res, err := s.Check(t.Context(), req)
		if err != nil || res.Outcome != store.Replay || res.Consumption.ID == "" {
			t.Errorf("Check(used key) = %s, %v; want %s with the consumption", res.Outcome, err, store.Replay)
		}
		req.Cost = ptr(usd(61))
		if res, err := s.Check(t.Context(), req); err != nil || res.Outcome != store.Conflict {
			t.Errorf("Check(used key, other cost) = %s, %v; want %s", res.Outcome, err, store.Conflict)
		}
		res, err = s.Check(t.Context(), request(agent, "k2", 60))
		if err != nil || res.Outcome != store.Denied {
			t.Fatalf("Check(over the balance) = %s, %v; want %s", res.Outcome, err, store.Denied)
		}
		want := []entitlement.Denial{{EntitlementID: e.ID, Reason: entitlement.ReasonInsufficientBalance}}
		if d := cmpDiff(want, res.Denials); d != "" {
			t.Errorf("Check denials (-want +got):\n%s", d)
		}
	}},
	{"CheckLazyResetNotWritten", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		q := quota(agent, 1, clock.Now())
		q.Quota.Remaining = 0
		q = createEntitlement(t, s, q)
		clock.Advance(25 * time.Hour)
		res, err := s.Check(t.Context(), request(agent, "k", 0))
		if err != nil || res.Outcome != store.Allowed || res.Entitlement.Quota.Remaining != 1 {
			t.Fatalf("Check after the period = %s %+v, %v; want %s with the quota shown reset", res.Outcome, res.Entitlement, err, store.Allowed)
		}
		mustConsume(t, s, request(agent, "k", 0)) // the key is still unused
	}},
	{"CheckInvalid", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		_, err := s.Check(t.Context(), request(newAgent(), "", 1))
		wantCode(t, "Check(empty key)", err, store.CodeInvalid)
	}},
}

var consumptionTests = []subtest{
	{"ListConsumptions", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, _ := agentWithCredits(t, s, 1000, clock.Now())
		other := newAgent()
		createEntitlement(t, s, credits(other, 1000, clock.Now()))
		mustConsume(t, s, request(other, "x", 1))
		var all []entitlement.Consumption
		for i := range 5 {
			if i != 2 {
				clock.Advance(time.Second) // calls 1 and 2 share an instant
			}
			all = append(all, mustConsume(t, s, request(agent, fmt.Sprint("k", i), int64(i+1))).Consumption)
		}
		if all[1].ID > all[2].ID { // same instant: ordered by ID
			all[1], all[2] = all[2], all[1]
		}
		if d := cmpDiff(all, listAllConsumptions(t, s, agent, time.Time{})); d != "" {
			t.Errorf("ListConsumptions (all, pages of 2) mismatch (-want +got):\n%s", d)
		}
		since := all[3].OccurredAt
		if d := cmpDiff(all[3:], listAllConsumptions(t, s, agent, since)); d != "" {
			t.Errorf("ListConsumptions(since %v) mismatch (-want +got):\n%s", since, d)
		}
		items, next, err := s.ListConsumptions(t.Context(), agent, since.Add(time.Hour), store.Page{})
		if err != nil || len(items) != 0 || next != "" {
			t.Errorf("ListConsumptions(since the future) = %d items, next %q, %v; want none", len(items), next, err)
		}
		_, _, err = s.ListConsumptions(t.Context(), agent, time.Time{}, store.Page{Cursor: "%%%"})
		wantCode(t, "ListConsumptions(bad cursor)", err, store.CodeInvalid)
		// A cursor belongs to its list: another agent's list, or the same
		// list with another since, refuses it.
		_, cursor, err := s.ListConsumptions(t.Context(), agent, time.Time{}, store.Page{Limit: 1})
		if err != nil || cursor == "" {
			t.Fatalf("ListConsumptions(limit 1) = next %q, %v; want a cursor", cursor, err)
		}
		_, _, err = s.ListConsumptions(t.Context(), other, time.Time{}, store.Page{Cursor: cursor})
		wantCode(t, "ListConsumptions(another agent's cursor)", err, store.CodeInvalid)
		_, _, err = s.ListConsumptions(t.Context(), agent, since, store.Page{Cursor: cursor})
		wantCode(t, "ListConsumptions(a cursor of another since)", err, store.CodeInvalid)
	}},
}

// listAllConsumptions reads every page (of 2) of an agent's consumptions since since.
func listAllConsumptions(t *testing.T, s store.EntitlementStore, agentID string, since time.Time) []entitlement.Consumption {
	t.Helper()
	return listConsumptionPages(t, s, agentID, since, 2)
}

// listConsumptionPages reads every page (of limit) of an agent's consumptions since since.
func listConsumptionPages(t *testing.T, s store.EntitlementStore, agentID string, since time.Time, limit int) []entitlement.Consumption {
	t.Helper()
	out, _ := allPages(t, "ListConsumptions", limit, 10000, func(p store.Page) ([]entitlement.Consumption, string, error) {
		return s.ListConsumptions(t.Context(), agentID, since, p)
	})
	return out
}
