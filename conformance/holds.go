package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

var authorizeTests = []subtest{
	{"HoldCredits", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		res := mustAuthorize(t, s, holdRequest(agent, "h1", 300))
		want := entitlement.Hold{
			ID: res.Hold.ID, AgentID: agent, EntitlementID: e.ID, EntitlementType: entitlement.TypeCredits,
			Service: testService, Tool: testTool, IdempotencyKey: "h1", Status: entitlement.HoldOpen,
			MaxCost: usd(300), MaxUnits: 1, CreatedAt: clock.Now(), ExpiresAt: clock.Now().Add(entitlement.DefaultHoldTTL),
		}
		if d := cmpDiff(want, res.Hold); d != "" {
			t.Errorf("Authorize hold mismatch (-want +got):\n%s", d)
		}
		if d := cmpDiff(want, getHold(t, s, res.Hold.ID)); d != "" {
			t.Errorf("GetHold mismatch (-want +got):\n%s", d)
		}
		wantE := e
		wantE.Credits.Held = usd(300)
		wantEntitlement(t, s, "Authorize", wantE, res.Entitlement)
		// 700 is available, to consumes and to other holds alike.
		wantDenied(t, s, request(agent, "c1", 701), entitlement.Denial{EntitlementID: e.ID, Reason: entitlement.ReasonInsufficientBalance})
		wantHoldDenied(t, s, holdRequest(agent, "h2", 701), entitlement.Denial{EntitlementID: e.ID, Reason: entitlement.ReasonInsufficientBalance})
		h3 := mustAuthorize(t, s, holdRequest(agent, "h3", 200))
		if got := h3.Entitlement.Credits.Held; got != usd(500) {
			t.Errorf("Authorize(second hold) entitlement held = %v, want 500 USD", got)
		}
		if got := mustConsume(t, s, request(agent, "c2", 500)).Consumption.BalanceAfter; got != usd(500) {
			t.Errorf("consume of the 500 left: balanceAfter %v, want 500 USD (holds are not debited)", got)
		}
		wantDenied(t, s, request(agent, "c3", 1), entitlement.Denial{EntitlementID: e.ID, Reason: entitlement.ReasonInsufficientBalance})
		list, _, err := s.ListEntitlements(t.Context(), agent, store.EntitlementFilter{}, store.Page{})
		if err != nil || len(list) != 1 || list[0].Credits.Held != usd(500) {
			t.Errorf("ListEntitlements = %+v, %v; want the entitlement with 500 USD held", list, err)
		}
	}},
	{"HoldQuota", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, q := agentWithQuota(t, s, 5, clock.Now())
		res := mustAuthorize(t, s, entitlement.HoldRequest{ConsumeRequest: unitsRequest(agent, "h1", 3)})
		if res.Hold.MaxUnits != 3 || !res.Hold.MaxCost.IsZero() || res.Hold.EntitlementType != entitlement.TypeQuota {
			t.Errorf("quota hold = maxUnits %d, maxCost %v, type %s; want 3, none, quota", res.Hold.MaxUnits, res.Hold.MaxCost, res.Hold.EntitlementType)
		}
		if got := res.Entitlement.Quota; got.Held != 3 || got.Remaining != 5 {
			t.Errorf("Authorize entitlement quota = held %d remaining %d, want 3 and 5", got.Held, got.Remaining)
		}
		wantHeld(t, s, q.ID, 3, 5)
		wantDenied(t, s, unitsRequest(agent, "c1", 3), entitlement.Denial{EntitlementID: q.ID, Reason: entitlement.ReasonQuotaExhausted})
		mustConsume(t, s, unitsRequest(agent, "c2", 2))
		wantHeld(t, s, q.ID, 3, 3)
	}},
	{"HoldSubscription", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		sub := createEntitlement(t, s, subscription(agent, clock.Now()))
		res := mustAuthorize(t, s, holdRequest(agent, "h1", 300))
		if res.Hold.EntitlementID != sub.ID || res.Hold.MaxCost != usd(300) || res.Hold.MaxUnits != 1 {
			t.Errorf("subscription hold = %+v, want one on %s recording maxCost 300 USD", res.Hold, sub.ID)
		}
		if d := cmpDiff(sub, getEntitlement(t, s, sub.ID)); d != "" {
			t.Errorf("a subscription hold reserves nothing (-want +got):\n%s", d)
		}
		c := mustCapture(t, s, res.Hold, entitlement.Amount{}).Consumption
		if c.EntitlementID != sub.ID || c.Units != 1 || !c.Cost.IsZero() || c.HoldID != res.Hold.ID {
			t.Errorf("subscription capture consumption = %+v, want 1 unit on %s, no cost, holdId %s", c, sub.ID, res.Hold.ID)
		}
	}},
	{"HoldSelectsAsConsume", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, c, q := subscriptionFirst(t, s, clock.Now(), "Authorize", func(agent, key string) string {
			return mustAuthorize(t, s, holdRequest(agent, key, 10)).Hold.EntitlementID
		})
		onQuota := mustAuthorize(t, s, holdRequest(agent, "2", 10)).Hold
		if onQuota.EntitlementID != q.ID {
			t.Errorf("hold without the subscription on %s, want the quota %s", onQuota.EntitlementID, q.ID)
		}
		// The quota's one unit is held: holds and consumes alike go on to the credits.
		if got := mustAuthorize(t, s, holdRequest(agent, "3", 10)).Hold.EntitlementID; got != c.ID {
			t.Errorf("hold with the quota held on %s, want the credits %s", got, c.ID)
		}
		if got := mustConsume(t, s, request(agent, "4", 10)).Consumption; got.EntitlementID != c.ID || got.BalanceAfter != usd(990) {
			t.Errorf("consume with the quota held charged %s (balanceAfter %v), want the credits %s (990 USD)", got.EntitlementID, got.BalanceAfter, c.ID)
		}
		mustRelease(t, s, onQuota, store.Released)
		if got := mustConsume(t, s, request(agent, "5", 10)).Consumption.EntitlementID; got != q.ID {
			t.Errorf("consume after the quota's hold was released charged %s, want the quota %s", got, q.ID)
		}
	}},
	{"HoldReplay", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		req := holdRequest(agent, "h1", 300)
		first := mustAuthorize(t, s, req).Hold
		clock.Advance(time.Second)
		again := authorize(t, s, req)
		if again.Outcome != store.Replay || again.Entitlement.ID != "" {
			t.Fatalf("Authorize(same key and parameters) = %s (entitlement %s), want %s without the entitlement", again.Outcome, again.Entitlement.ID, store.Replay)
		}
		if d := cmpDiff(first, again.Hold); d != "" {
			t.Errorf("replayed hold differs from the original (-want +got):\n%s", d)
		}
		wantHeld(t, s, e.ID, 300, 1000)
		captured := mustCapture(t, s, first, entitlement.Amount{Cost: ptr(usd(120))})
		again = authorize(t, s, req)
		if again.Outcome != store.Replay {
			t.Fatalf("Authorize after the capture = %s, want %s", again.Outcome, store.Replay)
		}
		if d := cmpDiff(captured.Hold, again.Hold); d != "" {
			t.Errorf("replay after the capture: hold (-captured +replayed):\n%s", d)
		}
		if d := cmpDiff(captured.Consumption, again.Consumption); d != "" {
			t.Errorf("replay after the capture: consumption (-captured +replayed):\n%s", d)
		}
		wantHeld(t, s, e.ID, 0, 880)
	}},
	{"HoldReplayAfterReleaseAndExpiry", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, _ := agentWithCredits(t, s, 1000, clock.Now())
		released := holdRequest(agent, "released", 100)
		h := mustAuthorize(t, s, released).Hold
		mustRelease(t, s, h, store.Released)
		if res := authorize(t, s, released); res.Outcome != store.Replay || res.Hold.Status != entitlement.HoldReleased || res.Hold.ID != h.ID {
			t.Errorf("Authorize(a released hold's key) = %s, hold %s %s; want %s of %s, released", res.Outcome, res.Hold.ID, res.Hold.Status, store.Replay, h.ID)
		}
		expiring := holdRequest(agent, "expiring", 100)
		expiring.TTL = time.Minute
		h = mustAuthorize(t, s, expiring).Hold
		clock.Advance(time.Minute)
		res := authorize(t, s, expiring)
		if res.Outcome != store.Replay || res.Hold.Status != entitlement.HoldExpired || res.Hold.EndedAt == nil || !res.Hold.EndedAt.Equal(h.ExpiresAt) {
			t.Errorf("Authorize(an expired hold's key) = %s, hold %s endedAt %v; want %s, expired at %v", res.Outcome, res.Hold.Status, res.Hold.EndedAt, store.Replay, h.ExpiresAt)
		}
	}},
	{"HoldConflict", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		mustAuthorize(t, s, holdRequest(agent, "h1", 300))
		variant := func(f func(r *entitlement.HoldRequest)) entitlement.HoldRequest {
			r := holdRequest(agent, "h1", 300)
			f(&r)
			return r
		}
		variants := map[string]entitlement.HoldRequest{
			"maxCost":       variant(func(r *entitlement.HoldRequest) { r.Cost = ptr(usd(301)) }),
			"tool":          variant(func(r *entitlement.HoldRequest) { r.Tool = "other" }),
			"maxUnits":      variant(func(r *entitlement.HoldRequest) { r.Units = 2 }),
			"ttl":           variant(func(r *entitlement.HoldRequest) { r.TTL = time.Hour }),
			"entitlementId": variant(func(r *entitlement.HoldRequest) { r.EntitlementID = e.ID }),
		}
		for name, req := range variants {
			if res := authorize(t, s, req); res.Outcome != store.Conflict || res.Hold.ID != "" {
				t.Errorf("Authorize(same key, other %s) = %s (hold %q), want %s and no hold", name, res.Outcome, res.Hold.ID, store.Conflict)
			}
		}
		wantHeld(t, s, e.ID, 300, 1000)
	}},
	{"HoldKeyNamesOneCall", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		// A key used by a consume cannot name a hold, nor the other way
		// round, even with the same parameters.
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		mustConsume(t, s, request(agent, "consumed", 100))
		if res := authorize(t, s, holdRequest(agent, "consumed", 100)); res.Outcome != store.Conflict || res.Hold.ID != "" {
			t.Errorf("Authorize(a consume's key) = %s (hold %q), want %s", res.Outcome, res.Hold.ID, store.Conflict)
		}
		h := mustAuthorize(t, s, holdRequest(agent, "held", 100)).Hold
		for _, when := range []string{"open", "captured"} {
			if when == "captured" {
				mustCapture(t, s, h, entitlement.Amount{})
			}
			if res := checkAndConsume(t, s, request(agent, "held", 100)); res.Outcome != store.Conflict || res.Consumption.ID != "" {
				t.Errorf("CheckAndConsume(the key of a hold, %s) = %s, want %s", when, res.Outcome, store.Conflict)
			}
			if res, err := s.Check(t.Context(), request(agent, "held", 100)); err != nil || res.Outcome != store.Conflict {
				t.Errorf("Check(the key of a hold, %s) = %s, %v; want %s", when, res.Outcome, err, store.Conflict)
			}
		}
		wantHeld(t, s, e.ID, 0, 800)
	}},
	{"HoldInvalid", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		withTTL := func(key string, ttl time.Duration) entitlement.HoldRequest {
			r := holdRequest(agent, key, 1)
			r.TTL = ttl
			return r
		}
		for _, tc := range []struct {
			name, field string
			req         entitlement.HoldRequest
		}{
			{"TTL above the maximum", "ttlSeconds", withTTL("long", entitlement.MaxHoldTTL+time.Second)},
			{"TTL below a second", "ttlSeconds", withTTL("short", time.Millisecond)},
			{"negative TTL", "ttlSeconds", withTTL("negative", -time.Second)},
			{"negative maxCost", "maxCost.cents", holdRequest(agent, "k", -1)},
			{"empty key", "idempotencyKey", holdRequest(agent, "", 1)},
		} {
			_, err := s.Authorize(t.Context(), tc.req)
			wantField(t, fmt.Sprintf("Authorize(%s)", tc.name), err, store.CodeInvalid, tc.field)
		}
		wantHeld(t, s, e.ID, 0, 1000)
		for _, ttl := range []time.Duration{0, time.Second, time.Hour, entitlement.MaxHoldTTL} {
			want := ttl
			if ttl == 0 {
				want = entitlement.DefaultHoldTTL
			}
			h := mustAuthorize(t, s, withTTL(fmt.Sprint("ttl-", ttl), ttl)).Hold
			if !h.ExpiresAt.Equal(clock.Now().Add(want)) {
				t.Errorf("Authorize(TTL %v): expiresAt %v, want %v", ttl, h.ExpiresAt, clock.Now().Add(want))
			}
		}
	}},
	{"HoldTooMany", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		sub := createEntitlement(t, s, subscription(agent, clock.Now()))
		// The holds are asked for at once, so a store that coalesces calls
		// on one entitlement takes them in a few transactions.
		const n = entitlement.MaxOpenHolds
		results := make([]store.HoldResult, n)
		errs := make([]error, n)
		hold := func(i int) {
			req := holdRequest(agent, fmt.Sprint("h-", i), 1)
			req.TTL = time.Minute
			results[i], errs[i] = s.Authorize(t.Context(), req)
		}
		together(n, hold)
		retryUnavailable(t, "Authorize", errs, hold)
		for i, res := range results {
			if errs[i] == nil && (res.Outcome != store.Held || res.Hold.ID == "") {
				t.Fatalf("Authorize #%d of %d on an entitlement with room = %s %+v, want held", i, n, res.Outcome, res.Denials)
			}
		}
		if t.Failed() {
			return
		}
		first := results[0].Hold
		wantHoldDenied(t, s, holdRequest(agent, "over", 1), entitlement.Denial{EntitlementID: sub.ID, Reason: entitlement.ReasonTooManyHolds})
		mustRelease(t, s, first, store.Released)
		mustAuthorize(t, s, holdRequest(agent, "after-release", 1))
		wantHoldDenied(t, s, holdRequest(agent, "over-again", 1), entitlement.Denial{EntitlementID: sub.ID, Reason: entitlement.ReasonTooManyHolds})
		// Holds past their expiry end before they are counted.
		clock.Advance(time.Minute)
		mustAuthorize(t, s, holdRequest(agent, "after-expiry", 1))
	}},
}

// wantHoldDenied authorizes req and fails unless it is denied with exactly
// want (in any order), with no hold.
func wantHoldDenied(t *testing.T, s store.EntitlementStore, req entitlement.HoldRequest, want ...entitlement.Denial) {
	t.Helper()
	holdAnswer(req, authorize(t, s, req)).wantDenied(t, want)
}

// holdDenialTests run every denial case of consume through Authorize: the
// same fixtures give the same reasons, and no hold.
var holdDenialTests = func() []subtest {
	out := denialSubtests("HoldDenied", func(t *testing.T, s store.EntitlementStore, e entitlement.Entitlement, req entitlement.ConsumeRequest, want []entitlement.Denial) {
		wantHoldDenied(t, s, entitlement.HoldRequest{ConsumeRequest: req}, want...)
		if got := getEntitlement(t, s, e.ID); heldOf(got) != 0 {
			t.Errorf("a denied hold left %d held", heldOf(got))
		}
	})
	return append(out,
		subtest{"HoldDeniedNoEntitlements", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
			wantHoldDenied(t, s, holdRequest(newAgent(), "k", 1), entitlement.Denial{Reason: entitlement.ReasonNotFound})
		}},
		subtest{"HoldDeniedOtherAgentsEntitlement", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
			theirs := createEntitlement(t, s, credits(newAgent(), 1000, clock.Now()))
			req := holdRequest(newAgent(), "k", 1)
			req.EntitlementID = theirs.ID
			wantHoldDenied(t, s, req, entitlement.Denial{EntitlementID: theirs.ID, Reason: entitlement.ReasonNotFound})
			req.EntitlementID = "no-such-entitlement"
			wantHoldDenied(t, s, req, entitlement.Denial{EntitlementID: "no-such-entitlement", Reason: entitlement.ReasonNotFound})
		}},
		subtest{"HoldDeniedEveryReason", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
			agent := newAgent()
			wantHoldDenied(t, s, holdRequest(agent, "k", 100), everyReason(t, s, agent, clock.Now())...)
		}},
	)
}()
