package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// instantTests: an instant given is honoured as given, the zero time
// (0001-01-01T00:00:00Z) included, which is long past and no sentinel for
// "never"; an instant not given stays absent (nil) on the entitlement, the
// payment's grant and the receipt.
var instantTests = []subtest{
	{"InstantZeroIsAnInstant", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		var zero time.Time
		expiring := credits(agent, 100, clock.Now())
		expiring.ExpiresAt = &zero
		ended := subscription(agent, clock.Now())
		ended.Subscription.ValidUntil = &zero
		for _, e := range []entitlement.Entitlement{expiring, ended} {
			createEntitlement(t, s, e)
			got := getEntitlement(t, s, e.ID)
			if exp, ok := got.EffectiveExpiry(); !ok || !exp.Equal(zero) {
				t.Errorf("GetEntitlement(%s with an expiry of %v): expiresAt %v, validUntil %v; want the instant kept",
					e.Type, zero, got.ExpiresAt, got.Subscription.ValidUntil)
			}
			req := request(agent, "zero-"+string(e.Type), 1)
			req.EntitlementID = e.ID
			wantDenied(t, s, req, entitlement.Denial{EntitlementID: e.ID, Reason: entitlement.ReasonExpired})
		}
		since := subscription(agent, clock.Now())
		since.Subscription = entitlement.Subscription{ValidFrom: zero}
		createEntitlement(t, s, since)
		req := request(agent, "zero-from", 0)
		req.Cost, req.EntitlementID = nil, since.ID
		mustConsume(t, s, req)
	}},
	{"InstantAbsentStaysAbsent", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		e := subscription(agent, clock.Now())
		e.Subscription.ValidUntil = nil
		if got := createEntitlement(t, s, e); got.Subscription.ValidUntil != nil || got.ExpiresAt != nil {
			t.Errorf("CreateEntitlement(no end): validUntil %v, expiresAt %v; want both nil", got.Subscription.ValidUntil, got.ExpiresAt)
		}
		if got := getEntitlement(t, s, e.ID); got.Subscription.ValidUntil != nil || got.ExpiresAt != nil {
			t.Errorf("GetEntitlement(no end): validUntil %v, expiresAt %v; want both nil", got.Subscription.ValidUntil, got.ExpiresAt)
		}
		req := newPayment(agent, "no-end", 900)
		req.Grant = subscriptionGrant(nil)
		p := createPayment(t, s, req)
		if stored, err := s.GetPayment(t.Context(), p.ID); err != nil || stored.Grant.ValidUntil != nil || stored.Grant.ExpiresAt != nil {
			t.Errorf("GetPayment(grant with no end) = grant %+v, %v; want validUntil and expiresAt nil", stored.Grant, err)
		}
		c := completePayment(t, s, p.ID)
		if len(c.Entitlements) != 1 || c.Entitlements[0].Subscription.ValidUntil != nil || c.Entitlements[0].ExpiresAt != nil {
			t.Fatalf("CompletePayment(grant with no end): entitlements %+v; want one with validUntil and expiresAt nil", c.Entitlements)
		}
		if g := c.Receipt.Grants; len(g) != 1 || g[0].ValidUntil != nil || g[0].ExpiresAt != nil {
			t.Errorf("CompletePayment(grant with no end): receipt grants %+v; want one with validUntil and expiresAt nil", g)
		}
		stored, err := s.GetReceipt(t.Context(), c.Receipt.ID)
		if err != nil || len(stored.Grants) != 1 || stored.Grants[0].ValidUntil != nil {
			t.Errorf("GetReceipt = grants %+v, %v; want one with validUntil nil", stored.Grants, err)
		}
	}},
	{"InstantPassedBeforeCompletion", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		// A grant's instant that passes while its payment is pending is
		// kept: the payment succeeds and grants an entitlement expired
		// from the start, as its receipt shows.
		agent := newAgent()
		until := clock.Now().Add(time.Hour)
		req := newPayment(agent, "late", 900)
		req.Grant = subscriptionGrant(&until)
		p := createPayment(t, s, req)
		clock.Advance(2 * time.Hour)
		c := completePayment(t, s, p.ID)
		if len(c.Entitlements) != 1 || c.Entitlements[0].Subscription.ValidUntil == nil || !c.Entitlements[0].Subscription.ValidUntil.Equal(until) {
			t.Fatalf("CompletePayment(grant until %v, 2 h later): entitlements %+v; want one valid until %v", until, c.Entitlements, until)
		}
		if g := c.Receipt.Grants; len(g) != 1 || g[0].ValidUntil == nil || !g[0].ValidUntil.Equal(until) {
			t.Errorf("CompletePayment: receipt grants %+v; want one valid until %v", g, until)
		}
		wantDenied(t, s, entitlement.ConsumeRequest{AgentID: agent, Service: testService, Tool: testTool, IdempotencyKey: "late-call"},
			entitlement.Denial{EntitlementID: c.Entitlements[0].ID, Reason: entitlement.ReasonExpired})
	}},
}

// subscriptionGrant is a payment's grant of a subscription to every
// service, valid until until (nil: no end).
func subscriptionGrant(until *time.Time) payment.Grant {
	return payment.Grant{Type: entitlement.TypeSubscription, Scope: entitlement.Scope{Service: entitlement.AnyService}, ValidUntil: until}
}
