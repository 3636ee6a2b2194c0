package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

var captureTests = []subtest{
	{"CaptureDefault", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		h := mustAuthorize(t, s, holdRequest(agent, "h1", 300)).Hold
		now := clock.Advance(time.Second)
		res := mustCapture(t, s, h, entitlement.Amount{})
		want := entitlement.Consumption{
			ID: res.Consumption.ID, AgentID: agent, EntitlementID: e.ID, EntitlementType: entitlement.TypeCredits,
			Service: testService, Tool: testTool, IdempotencyKey: "h1", Cost: usd(300), Units: 1,
			OccurredAt: now, BalanceAfter: usd(700), HoldID: h.ID,
		}
		if d := cmpDiff(want, res.Consumption); d != "" {
			t.Errorf("CaptureHold consumption mismatch (-want +got):\n%s", d)
		}
		wantHold := h
		wantHold.Status, wantHold.EndedAt = entitlement.HoldCaptured, &now
		wantHold.Captured, wantHold.ConsumptionID = &entitlement.Charge{Cost: usd(300), Units: 1}, want.ID
		if d := cmpDiff(wantHold, res.Hold); d != "" {
			t.Errorf("CaptureHold hold mismatch (-want +got):\n%s", d)
		}
		if d := cmpDiff(wantHold, getHold(t, s, h.ID)); d != "" {
			t.Errorf("GetHold after the capture (-want +got):\n%s", d)
		}
		wantE := e
		wantE.Credits.Balance = usd(700)
		if d := cmpDiff(wantE, res.Entitlement); d != "" {
			t.Errorf("CaptureHold entitlement mismatch (-want +got):\n%s", d)
		}
		wantHeld(t, s, e.ID, 0, 700)
		got, err := s.GetConsumption(t.Context(), want.ID)
		if err != nil {
			t.Fatalf("GetConsumption(%s): %v", want.ID, err)
		}
		if d := cmpDiff(want, got); d != "" {
			t.Errorf("GetConsumption of the capture (-want +got):\n%s", d)
		}
		if d := cmpDiff([]entitlement.Consumption{want}, listAllConsumptions(t, s, agent, time.Time{})); d != "" {
			t.Errorf("ListConsumptions after the capture (-want +got):\n%s", d)
		}
	}},
	{"CapturePartial", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		a := mustAuthorize(t, s, holdRequest(agent, "a", 300)).Hold
		mustAuthorize(t, s, holdRequest(agent, "b", 200))
		res := mustCapture(t, s, a, entitlement.Amount{Cost: ptr(usd(120))})
		if c := res.Consumption; c.Cost != usd(120) || c.BalanceAfter != usd(880) {
			t.Errorf("capture of 120 of 300: cost %v, balanceAfter %v; want 120 and 880 USD", c.Cost, c.BalanceAfter)
		}
		if got := res.Hold.Captured; got == nil || *got != (entitlement.Charge{Cost: usd(120), Units: 1}) {
			t.Errorf("hold captured = %+v, want 120 USD and 1 unit", got)
		}
		wantHeld(t, s, e.ID, 200, 880) // the other hold stays; 180 came back
		mustConsume(t, s, request(agent, "c", 680))
		wantDenied(t, s, request(agent, "c2", 1), entitlement.Denial{EntitlementID: e.ID, Reason: entitlement.ReasonInsufficientBalance})
	}},
	{"CaptureQuota", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, q := agentWithQuota(t, s, 5, clock.Now())
		h := mustAuthorize(t, s, entitlement.HoldRequest{ConsumeRequest: unitsRequest(agent, "h", 3)}).Hold
		c := mustCapture(t, s, h, entitlement.Amount{Units: ptr[int64](2)}).Consumption
		if c.Units != 2 || c.RemainingAfter == nil || *c.RemainingAfter != 3 || c.HoldID != h.ID {
			t.Errorf("quota capture of 2 of 3 = units %d, remainingAfter %v, holdId %q; want 2, 3, %s", c.Units, c.RemainingAfter, c.HoldID, h.ID)
		}
		wantHeld(t, s, q.ID, 0, 3)
	}},
	{"CaptureReplay", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		h := mustAuthorize(t, s, holdRequest(agent, "h", 300)).Hold
		amount := entitlement.Amount{Cost: ptr(usd(120))}
		first := mustCapture(t, s, h, amount)
		clock.Advance(time.Second)
		again, err := s.CaptureHold(t.Context(), h.ID, agent, amount)
		if err != nil || again.Outcome != store.Replay {
			t.Fatalf("CaptureHold(same amount) again = %s, %v; want %s", again.Outcome, err, store.Replay)
		}
		if d := cmpDiff(first.Consumption, again.Consumption); d != "" {
			t.Errorf("replayed capture consumption (-first +replay):\n%s", d)
		}
		if d := cmpDiff(first.Hold, again.Hold); d != "" {
			t.Errorf("replayed capture hold (-first +replay):\n%s", d)
		}
		for name, a := range map[string]entitlement.Amount{"another amount": {Cost: ptr(usd(130))}, "no amount (the whole hold)": {}} {
			_, err := s.CaptureHold(t.Context(), h.ID, agent, a)
			wantCode(t, "CaptureHold("+name+") after a capture", err, store.CodeConflict)
		}
		wantHeld(t, s, e.ID, 0, 880)
		if got := listAllConsumptions(t, s, agent, time.Time{}); len(got) != 1 {
			t.Errorf("ListConsumptions = %d consumptions, want 1 (captured once)", len(got))
		}
	}},
	{"CaptureInvalid", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		h := mustAuthorize(t, s, holdRequest(agent, "h", 300)).Hold
		for _, tc := range append([]amountCase{
			{"above the hold", "cost.cents", entitlement.Amount{Cost: ptr(usd(301))}},
			{"units above the hold", "units", entitlement.Amount{Units: ptr[int64](2)}},
			{"negative units", "units", entitlement.Amount{Units: ptr[int64](-1)}},
		}, foreignOrNegative...) {
			_, err := s.CaptureHold(t.Context(), h.ID, agent, tc.a)
			wantField(t, "CaptureHold("+tc.name+")", err, store.CodeInvalid, tc.field)
		}
		wantHoldStatus(t, s, h.ID, entitlement.HoldOpen, time.Time{})
		wantHeld(t, s, e.ID, 300, 1000)
	}},
	{"CaptureNotFound", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, _ := agentWithCredits(t, s, 1000, clock.Now())
		h := mustAuthorize(t, s, holdRequest(agent, "h", 300)).Hold
		for _, tc := range []struct{ name, id, agent string }{
			{"unknown hold", "no-such-hold", agent},
			{"another agent's hold", h.ID, newAgent()},
		} {
			_, err := s.CaptureHold(t.Context(), tc.id, tc.agent, entitlement.Amount{})
			wantCode(t, "CaptureHold("+tc.name+")", err, store.CodeNotFound)
			_, err = s.ReleaseHold(t.Context(), tc.id, tc.agent)
			wantCode(t, "ReleaseHold("+tc.name+")", err, store.CodeNotFound)
		}
		_, err := s.GetHold(t.Context(), "no-such-hold")
		wantCode(t, "GetHold(unknown)", err, store.CodeNotFound)
		wantHoldStatus(t, s, h.ID, entitlement.HoldOpen, time.Time{})
	}},
	{"CaptureAfterRelease", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		h := mustAuthorize(t, s, holdRequest(agent, "h", 300)).Hold
		mustRelease(t, s, h, store.Released)
		_, err := s.CaptureHold(t.Context(), h.ID, agent, entitlement.Amount{})
		wantCode(t, "CaptureHold(released)", err, store.CodeConflict)
		wantHeld(t, s, e.ID, 0, 1000)
	}},
	{"CaptureAfterExpiry", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		h := shortHold(t, s, agent, "h", 300, time.Minute)
		clock.Advance(time.Minute) // an expiry exactly at now has passed
		for i := range 2 {
			_, err := s.CaptureHold(t.Context(), h.ID, agent, entitlement.Amount{})
			wantConflictOf(t, fmt.Sprintf("CaptureHold(expired) #%d", i+1), err, entitlement.ErrHoldExpired)
		}
		wantEndedUncharged(t, s, h.ID, entitlement.HoldExpired, h.ExpiresAt, e.ID, 1000, agent, "a refused capture")
	}},
	{"CaptureDepletes", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, c := agentWithCredits(t, s, 100, clock.Now())
		h := mustAuthorize(t, s, holdRequest(agent, "part", 100)).Hold
		mustCapture(t, s, h, entitlement.Amount{Cost: ptr(usd(60))})
		if n := depletedEvents(t, s, c.ID); n != 0 {
			t.Errorf("a capture that left 40 cents wrote %d entitlement.depleted events, want 0", n)
		}
		h = mustAuthorize(t, s, holdRequest(agent, "rest", 40)).Hold
		mustCapture(t, s, h, entitlement.Amount{})
		if n := depletedEvents(t, s, c.ID); n != 1 {
			t.Errorf("a capture that emptied the credits wrote %d entitlement.depleted events, want 1", n)
		}
		q := quota(agent, 2, clock.Now())
		q.Scope.Service = "other"
		q = createEntitlement(t, s, q)
		req := holdRequest(agent, "q", 0)
		req.Service, req.Cost, req.Units = "other", nil, 2
		mustCapture(t, s, mustAuthorize(t, s, req).Hold, entitlement.Amount{})
		if n := depletedEvents(t, s, q.ID); n != 1 {
			t.Errorf("a capture of the quota's last units wrote %d entitlement.depleted events, want 1", n)
		}
	}},
}

var releaseTests = []subtest{
	{"Release", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		h := mustAuthorize(t, s, holdRequest(agent, "h", 300)).Hold
		now := clock.Advance(time.Second)
		res := mustRelease(t, s, h, store.Released)
		want := h
		want.Status, want.EndedAt = entitlement.HoldReleased, &now
		if d := cmpDiff(want, res.Hold); d != "" {
			t.Errorf("ReleaseHold hold mismatch (-want +got):\n%s", d)
		}
		if d := cmpDiff(e, res.Entitlement); d != "" {
			t.Errorf("ReleaseHold entitlement mismatch (-want +got):\n%s", d)
		}
		clock.Advance(time.Second)
		again := mustRelease(t, s, h, store.Replay)
		if d := cmpDiff(want, again.Hold); d != "" || again.Entitlement.ID != "" {
			t.Errorf("ReleaseHold again: entitlement %q (want none), hold (-want +got):\n%s", again.Entitlement.ID, d)
		}
		wantEndedUncharged(t, s, h.ID, entitlement.HoldReleased, now, e.ID, 1000, agent, "a release")
	}},
	{"ReleaseAfterCapture", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		h := mustAuthorize(t, s, holdRequest(agent, "h", 300)).Hold
		mustCapture(t, s, h, entitlement.Amount{Cost: ptr(usd(100))})
		_, err := s.ReleaseHold(t.Context(), h.ID, agent)
		wantCode(t, "ReleaseHold(captured)", err, store.CodeConflict)
		wantHoldStatus(t, s, h.ID, entitlement.HoldCaptured, clock.Now())
		wantHeld(t, s, e.ID, 0, 900)
	}},
	{"ReleaseAfterExpiry", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		h := shortHold(t, s, agent, "h", 300, time.Minute)
		clock.Advance(2 * time.Minute)
		for i := range 2 {
			res := mustRelease(t, s, h, store.Replay)
			if res.Hold.Status != entitlement.HoldExpired || res.Hold.EndedAt == nil || !res.Hold.EndedAt.Equal(h.ExpiresAt) {
				t.Errorf("ReleaseHold(expired) #%d: hold %s endedAt %v, want expired at %v", i+1, res.Hold.Status, res.Hold.EndedAt, h.ExpiresAt)
			}
		}
		wantHoldStatus(t, s, h.ID, entitlement.HoldExpired, h.ExpiresAt)
		wantHeld(t, s, e.ID, 0, 1000)
	}},
}
