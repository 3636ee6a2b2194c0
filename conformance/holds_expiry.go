package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// shortHold authorizes a hold of cents on testService that lasts ttl.
func shortHold(t *testing.T, s store.EntitlementStore, agent, key string, cents int64, ttl time.Duration) entitlement.Hold {
	t.Helper()
	req := holdRequest(agent, key, cents)
	req.TTL = ttl
	return mustAuthorize(t, s, req).Hold
}

// expireHolds calls ExpireHolds and fails the test unless it ended want holds.
func expireHolds(t *testing.T, s store.EntitlementStore, limit, want int) {
	t.Helper()
	n, err := s.ExpireHolds(t.Context(), limit)
	if err != nil || n != want {
		t.Errorf("ExpireHolds(%d) = %d, %v; want %d", limit, n, err, want)
	}
}

var expiryTests = []subtest{
	{"HoldExpiresOnTheNextConsume", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 100, clock.Now())
		h := shortHold(t, s, agent, "h", 80, time.Minute)
		wantDenied(t, s, request(agent, "c1", 30), entitlement.Denial{EntitlementID: e.ID, Reason: entitlement.ReasonInsufficientBalance})
		clock.Advance(time.Minute)
		// Reads show the hold expired and nothing held before any write.
		wantHoldStatus(t, s, h.ID, entitlement.HoldExpired, h.ExpiresAt)
		wantHeld(t, s, e.ID, 0, 100)
		if got := mustConsume(t, s, request(agent, "c2", 30)).Consumption.BalanceAfter; got != usd(70) {
			t.Errorf("consume after the hold's expiry: balanceAfter %v, want 70 USD", got)
		}
		wantHoldStatus(t, s, h.ID, entitlement.HoldExpired, h.ExpiresAt)
		expireHolds(t, s, 10, 0) // the consume ended it
	}},
	{"ExpireHoldsIdle", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, one := agentWithCredits(t, s, 1000, clock.Now())
		two := credits(agent, 1000, clock.Now())
		two.Scope.Service = "other"
		two = createEntitlement(t, s, two)
		a := shortHold(t, s, agent, "a", 100, time.Minute)
		b := shortHold(t, s, agent, "b", 200, time.Hour)
		c := shortHold(t, s, agent, "c", 300, 2*time.Minute)
		otherReq := holdRequest(agent, "d", 400)
		otherReq.Service, otherReq.TTL = "other", time.Minute
		d := mustAuthorize(t, s, otherReq).Hold
		expireHolds(t, s, 10, 0) // nothing is due yet
		clock.Advance(2 * time.Minute)
		expireHolds(t, s, 10, 3)
		expireHolds(t, s, 10, 0) // a hold ends once
		for _, h := range []entitlement.Hold{a, c, d} {
			wantHoldStatus(t, s, h.ID, entitlement.HoldExpired, h.ExpiresAt)
		}
		wantHoldStatus(t, s, b.ID, entitlement.HoldOpen, time.Time{})
		wantHeld(t, s, one.ID, 200, 1000)
		wantHeld(t, s, two.ID, 0, 1000)
	}},
	{"ExpireHoldsLimit", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		// The limit counts entitlements: each has one hold due here.
		agent := newAgent()
		var holds []entitlement.Hold
		for i, service := range []string{"s1", "s2", "s3"} {
			e := credits(agent, 100, clock.Now())
			e.Scope.Service = service
			createEntitlement(t, s, e)
			req := holdRequest(agent, service, int64(10+i))
			req.Service, req.TTL = service, time.Minute
			holds = append(holds, mustAuthorize(t, s, req).Hold)
		}
		clock.Advance(time.Minute)
		expireHolds(t, s, 2, 2)
		expireHolds(t, s, 2, 1)
		expireHolds(t, s, 2, 0)
		for _, h := range holds {
			wantHoldStatus(t, s, h.ID, entitlement.HoldExpired, h.ExpiresAt)
		}
	}},
	{"RevokeReleasesHolds", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		due := shortHold(t, s, agent, "due", 100, time.Minute)
		open := shortHold(t, s, agent, "open", 200, time.Hour)
		now := clock.Advance(time.Minute)
		revoked := revoke(t, s, e.ID)
		if revoked.Status != entitlement.StatusRevoked || heldOf(revoked) != 0 || revoked.Credits.Balance != usd(1000) {
			t.Errorf("RevokeEntitlement = status %s, held %d, balance %v; want revoked, nothing held, 1000 USD", revoked.Status, heldOf(revoked), revoked.Credits.Balance)
		}
		wantHoldStatus(t, s, due.ID, entitlement.HoldExpired, due.ExpiresAt)
		wantHoldStatus(t, s, open.ID, entitlement.HoldReleased, now)
		_, err := s.CaptureHold(t.Context(), open.ID, agent, entitlement.Amount{})
		wantCode(t, "CaptureHold(released by the revoke)", err, store.CodeConflict)
		expireHolds(t, s, 10, 0)
	}},
	{"RefundPaymentReleasesHolds", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		p := createPayment(t, s, newPayment(agent, "pay-1", 1000))
		granted := completePayment(t, s, p.ID).Entitlements
		if len(granted) != 1 {
			t.Fatalf("CompletePayment granted %d entitlements, want 1", len(granted))
		}
		h := mustAuthorize(t, s, holdRequest(agent, "h", 300)).Hold
		if h.EntitlementID != granted[0].ID {
			t.Fatalf("hold on %s, want the granted %s", h.EntitlementID, granted[0].ID)
		}
		now := clock.Advance(time.Second)
		refunded := refundPayment(t, s, p.ID)
		if len(refunded.Entitlements) != 1 || heldOf(refunded.Entitlements[0]) != 0 || refunded.Entitlements[0].Status != entitlement.StatusRevoked {
			t.Errorf("RefundPayment entitlements = %+v, want the grant revoked with nothing held", refunded.Entitlements)
		}
		wantHoldStatus(t, s, h.ID, entitlement.HoldReleased, now)
	}},
}
