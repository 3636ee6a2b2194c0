package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

func testPaymentFail(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	p := createPayment(t, s, newPayment(newAgent(), "k", 500))
	now := clock.Advance(time.Minute)
	got, err := s.FailPayment(ctx, p.ID, store.PaymentChange{Reason: "card_declined"})
	if err != nil {
		t.Fatalf("FailPayment: %v", err)
	}
	want := p
	want.Status, want.FailureReason, want.FailedAt, want.UpdatedAt = payment.StatusFailed, "card_declined", &now, now
	if d := cmpDiff(want, got); d != "" {
		t.Errorf("FailPayment mismatch (-want +got):\n%s", d)
	}
	clock.Advance(time.Minute)
	again, err := s.FailPayment(ctx, p.ID, store.PaymentChange{Reason: "other"})
	if d := cmpDiff(want, again); err != nil || d != "" {
		t.Errorf("FailPayment (again): %v, mismatch (-want +got):\n%s", err, d)
	}
	_, err = s.CompletePayment(ctx, p.ID, signing)
	wantCode(t, "CompletePayment(failed)", err, store.CodeConflict)
	_, err = s.RefundPayment(ctx, p.ID, signing)
	wantCode(t, "RefundPayment(failed)", err, store.CodeConflict)
	evs := wantEventTypes(t, s, event.PaymentFailed)
	if len(evs) == 1 {
		if got := eventData(t, evs[0])["id"]; got != p.ID {
			t.Errorf("payment.failed data id = %v, want %s", got, p.ID)
		}
	}
	items, _, err := s.ListEntitlements(ctx, p.AgentID, store.EntitlementFilter{}, store.Page{})
	if err != nil || len(items) != 0 {
		t.Errorf("a failed payment granted %d entitlements (%v), want none", len(items), err)
	}
}

func testPaymentRefund(t *testing.T, s store.EntitlementStore, clock *Clock) {
	agent := newAgent()
	p := createPayment(t, s, newPayment(agent, "k", 1000))
	done := completePayment(t, s, p.ID)
	ent := done.Entitlements[0]
	mustConsume(t, s, request(agent, "use-1", 300))
	now := clock.Advance(time.Hour)
	c := refundPayment(t, s, p.ID)
	if c.Replayed {
		t.Errorf("RefundPayment: Replayed true on the first refund")
	}
	left := ent
	left.Credits.Balance = usd(700)
	wantR := signed(t, receipt.Receipt{
		ID: c.Receipt.ID, Version: receipt.Version, Kind: receipt.KindRefund, Issuer: testIssuer,
		AgentID: agent, PaymentID: p.ID, Amount: usd(1000), Grants: []receipt.Grant{receipt.GrantOf(&left)}, IssuedAt: now,
	})
	if d := cmpDiff(wantR, c.Receipt); d != "" || c.Receipt.ID == "" || c.Receipt.ID == done.Receipt.ID {
		t.Errorf("refund receipt mismatch (-want +got):\n%s", d)
	}
	revoked := left
	revoked.Status, revoked.RevokedAt = entitlement.StatusRevoked, &now
	if d := cmpDiff([]entitlement.Entitlement{revoked}, c.Entitlements); d != "" {
		t.Errorf("refund entitlements mismatch (-want +got):\n%s", d)
	}
	if d := cmpDiff(revoked, getEntitlement(t, s, ent.ID)); d != "" {
		t.Errorf("GetEntitlement after refund (-want +got):\n%s", d)
	}
	if c.Payment.Status != payment.StatusRefunded || c.Payment.RefundReceiptID != c.Receipt.ID ||
		c.Payment.RefundedAt == nil || !c.Payment.RefundedAt.Equal(now) || c.Payment.ReceiptID != done.Receipt.ID {
		t.Errorf("refunded payment = %+v, want refunded at %v with both receipt IDs", c.Payment, now)
	}
	wantDenied(t, s, request(agent, "use-2", 1), entitlement.Denial{Reason: entitlement.ReasonNotFound})

	evs := pendingEvents(t, s)
	if d := cmpDiff([]event.Type{event.PaymentSucceeded, event.EntitlementGranted, event.PaymentRefunded, event.EntitlementRevoked},
		eventTypes(evs), sortEventTypes); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}

	clock.Advance(time.Hour)
	again := refundPayment(t, s, p.ID)
	if !again.Replayed || cmpDiff(c.Receipt, again.Receipt) != "" {
		t.Errorf("RefundPayment (again): Replayed %v, receipt diff:\n%s", again.Replayed, cmpDiff(c.Receipt, again.Receipt))
	}
	completed := completePayment(t, s, p.ID)
	if !completed.Replayed || cmpDiff(done.Receipt, completed.Receipt) != "" {
		t.Errorf("CompletePayment(refunded): Replayed %v, receipt diff (want the payment receipt):\n%s", completed.Replayed, cmpDiff(done.Receipt, completed.Receipt))
	}
	if n := len(pendingEvents(t, s)); n != len(evs) {
		t.Errorf("replays wrote %d more events", n-len(evs))
	}
}

func testPaymentInbound(t *testing.T, s store.EntitlementStore, _ *Clock) {
	ctx := t.Context()
	agent := newAgent()
	a := createPayment(t, s, newPayment(agent, "a", 100))
	b := createPayment(t, s, newPayment(agent, "b", 200))
	in := &store.InboundEvent{Source: "stripe", EventID: "evt_1"}
	withInbound := signing
	withInbound.Inbound = in
	c, err := s.CompletePayment(ctx, a.ID, withInbound)
	if err != nil || c.Replayed || c.Payment.Status != payment.StatusSucceeded {
		t.Fatalf("CompletePayment(a, evt_1) = %s replayed %v, %v; want succeeded", c.Payment.Status, c.Replayed, err)
	}
	before := pendingEvents(t, s)

	// The same provider event again, even for another change, changes nothing.
	got, err := s.FailPayment(ctx, b.ID, store.PaymentChange{Reason: "x", Inbound: in})
	if err != nil || got.Status != payment.StatusPending {
		t.Errorf("FailPayment(b, evt_1 again) = %s, %v; want b unchanged (pending)", got.Status, err)
	}
	r, err := s.RefundPayment(ctx, a.ID, withInbound)
	if err != nil || !r.Replayed || r.Payment.Status != payment.StatusSucceeded {
		t.Errorf("RefundPayment(a, evt_1 again) = %s replayed %v, %v; want a unchanged (succeeded), replayed", r.Payment.Status, r.Replayed, err)
	}
	again, err := s.CompletePayment(ctx, a.ID, withInbound)
	if err != nil || !again.Replayed || cmpDiff(c.Receipt, again.Receipt) != "" {
		t.Errorf("CompletePayment(a, evt_1 again): replayed %v, %v, receipt diff:\n%s", again.Replayed, err, cmpDiff(c.Receipt, again.Receipt))
	}
	if got, err := s.GetPayment(ctx, b.ID); err != nil || got.Status != payment.StatusPending {
		t.Errorf("GetPayment(b) = %s, %v; want pending", got.Status, err)
	}
	if d := cmpDiff(before, pendingEvents(t, s)); d != "" {
		t.Errorf("events changed by replayed inbound events (-want +got):\n%s", d)
	}

	// A new provider event goes through.
	got, err = s.FailPayment(ctx, b.ID, store.PaymentChange{Reason: "x", Inbound: &store.InboundEvent{Source: "stripe", EventID: "evt_2"}})
	if err != nil || got.Status != payment.StatusFailed {
		t.Errorf("FailPayment(b, evt_2) = %s, %v; want failed", got.Status, err)
	}
}
