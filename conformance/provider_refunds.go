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

// providerRefundTests are the contract of ProviderPayments.RefundPaymentPart
// and DisputePayment.
var providerRefundTests = []subtest{
	{"PaymentRefundPart", testPaymentRefundPart},
	{"PaymentRefundPartBounds", testPaymentRefundPartBounds},
	{"PaymentRefundPartAfterSpending", testPaymentRefundPartAfterSpending},
	{"PaymentRefundPartCrossesAlert", testPaymentRefundPartCrossesAlert},
	{"PaymentDispute", testPaymentDispute},
	{"PaymentDisputeWon", testPaymentDisputeWon},
}

// succeeded returns a completed credits payment of cents USD and its
// entitlement's ID.
func succeeded(t *testing.T, s store.EntitlementStore, agent, key string, cents int64) (payment.Payment, string) {
	t.Helper()
	p := createPayment(t, s, stripePayment(agent, key, cents))
	c := completePayment(t, s, p.ID)
	return c.Payment, c.Entitlements[0].ID
}

func refundPart(t *testing.T, s store.EntitlementStore, id string, total int64, ch store.PaymentChange) store.Completion {
	t.Helper()
	return must(s.RefundPaymentPart(t.Context(), id, usd(total), ch))(t, "RefundPaymentPart(%s, %d)", id, total)
}

func countEvents(t *testing.T, s store.EntitlementStore, typ event.Type) int {
	t.Helper()
	n := 0
	for _, e := range pendingEvents(t, s) {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func testPaymentRefundPart(t *testing.T, s store.EntitlementStore, clock *Clock) {
	agent := newAgent()
	p, eid := succeeded(t, s, agent, "part", 1000)
	clock.Advance(time.Minute)
	first := refundPart(t, s, p.ID, 300, signing)
	if first.Replayed || first.Payment.Status != payment.StatusSucceeded || first.Payment.RefundedAmount == nil || *first.Payment.RefundedAmount != usd(300) {
		t.Fatalf("RefundPaymentPart(300) = replayed %v, status %s, refunded %v; want a new partial refund of 300 on a succeeded payment",
			first.Replayed, first.Payment.Status, first.Payment.RefundedAmount)
	}
	if r := first.Receipt; r.Kind != receipt.KindRefund || r.Amount != usd(300) || r.PaymentID != p.ID || r.JWS == "" {
		t.Errorf("receipt = %s of %v for %s (jws %q), want a signed refund receipt of 300 for the payment", r.Kind, r.Amount, r.PaymentID, r.JWS)
	}
	if got := getEntitlement(t, s, eid); got.Credits.Balance != usd(700) || got.Status != entitlement.StatusActive {
		t.Errorf("entitlement after refunding 300 of 1000: balance %v, %s; want 700, active", got.Credits.Balance, got.Status)
	}
	if stored, err := s.GetReceipt(t.Context(), first.Receipt.ID); err != nil || stored.Amount != usd(300) {
		t.Errorf("GetReceipt(partial refund) = %v, %v; want it stored", stored.Amount, err)
	}
	// A running total: the second event brings it to 500, a part of 200.
	second := refundPart(t, s, p.ID, 500, signing)
	if second.Receipt.Amount != usd(200) || *second.Payment.RefundedAmount != usd(500) {
		t.Errorf("RefundPaymentPart(500) = part %v, total %v; want 200, 500", second.Receipt.Amount, second.Payment.RefundedAmount)
	}
	// An overtaken event (300 again) and one already recorded change nothing.
	ch := signing
	ch.Inbound = &store.InboundEvent{Source: "stripe", EventID: "evt_part_1"}
	refundPart(t, s, p.ID, 600, ch)
	for _, tc := range []struct {
		total int64
		ch    store.PaymentChange
	}{{300, signing}, {900, ch}} {
		again := refundPart(t, s, p.ID, tc.total, tc.ch)
		if !again.Replayed || *again.Payment.RefundedAmount != usd(600) {
			t.Errorf("RefundPaymentPart(%d) replay = replayed %v, total %v; want replayed, 600", tc.total, again.Replayed, again.Payment.RefundedAmount)
		}
	}
	if got := getEntitlement(t, s, eid); got.Credits.Balance != usd(400) {
		t.Errorf("balance after refunds to 600: %v, want 400", got.Credits.Balance)
	}
	if n := countEvents(t, s, event.PaymentPartiallyRefunded); n != 3 {
		t.Errorf("payment.partially_refunded events: %d, want 3", n)
	}
	// A full refund afterwards revokes and gives back what remains.
	full := refundPayment(t, s, p.ID)
	if full.Receipt.Amount != usd(400) || full.Payment.Status != payment.StatusRefunded {
		t.Errorf("RefundPayment after partial refunds: receipt of %v, %s; want 400, refunded", full.Receipt.Amount, full.Payment.Status)
	}
	if again := refundPart(t, s, p.ID, 700, signing); !again.Replayed {
		t.Error("RefundPaymentPart after a full refund: not a replay")
	}
}

func testPaymentRefundPartBounds(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	pend := createPayment(t, s, stripePayment(agent, "pending", 1000))
	_, err := s.RefundPaymentPart(ctx, pend.ID, usd(100), signing)
	wantCode(t, "RefundPaymentPart(pending payment)", err, store.CodeConflict)
	p, _ := succeeded(t, s, agent, "bounds", 1000)
	for _, tc := range []struct {
		name  string
		total int64
		cur   string
	}{{"Zero", 0, "USD"}, {"Full", 1000, "USD"}, {"More", 1500, "USD"}, {"Currency", 100, "EUR"}} {
		m := usd(tc.total)
		m.Currency = tc.cur
		_, err := s.RefundPaymentPart(ctx, p.ID, m, signing)
		wantCode(t, "RefundPaymentPart("+tc.name+")", err, store.CodeInvalid)
	}
	_, err = s.RefundPaymentPart(ctx, "no-such-payment", usd(100), signing)
	wantCode(t, "RefundPaymentPart(unknown payment)", err, store.CodeNotFound)
	_, err = s.RefundPaymentPart(ctx, p.ID, usd(100), store.PaymentChange{Issuer: testIssuer})
	wantCode(t, "RefundPaymentPart(no signer)", err, store.CodeInvalid)
	if got, err := s.GetPayment(ctx, p.ID); err != nil || got.RefundedAmount != nil {
		t.Errorf("payment after refused partial refunds: refunded %v, %v; want none", got.RefundedAmount, err)
	}
}

// testPaymentRefundPartAfterSpending: the refunded part comes off what is
// available, never below zero nor below what a hold reserves; the rest
// stays usable.
func testPaymentRefundPartAfterSpending(t *testing.T, s store.EntitlementStore, clock *Clock) {
	agent := newAgent()
	p, eid := succeeded(t, s, agent, "spent", 1000)
	req := request(agent, "call-1", 700)
	req.EntitlementID = eid
	mustConsume(t, s, req)
	hreq := holdRequest(agent, "hold-1", 200)
	hreq.EntitlementID = eid
	mustAuthorize(t, s, hreq)
	// 300 left, 200 of it held: a refund of 500 takes the 100 available.
	refundPart(t, s, p.ID, 500, signing)
	got := getEntitlement(t, s, eid)
	if got.Credits.Balance != usd(200) || got.Credits.Held != usd(200) || got.Status != entitlement.StatusActive {
		t.Errorf("after refunding 500 with 100 available: balance %v held %v %s; want 200, 200, active",
			got.Credits.Balance, got.Credits.Held, got.Status)
	}
}

func testPaymentDispute(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	p, eid := succeeded(t, s, agent, "disputed", 1000)
	clock.Advance(time.Minute)
	ch := store.PaymentChange{Reason: "stripe: dispute opened (fraudulent)", Inbound: &store.InboundEvent{Source: "stripe", EventID: "evt_dp"}}
	got, err := s.DisputePayment(ctx, p.ID, ch)
	if err != nil {
		t.Fatalf("DisputePayment: %v", err)
	}
	if got.DisputedAt == nil || !got.DisputedAt.Equal(clock.Now()) || got.DisputeReason != ch.Reason || got.Status != payment.StatusSucceeded {
		t.Errorf("DisputePayment = disputedAt %v reason %q status %s; want now, the reason, succeeded", got.DisputedAt, got.DisputeReason, got.Status)
	}
	if e := getEntitlement(t, s, eid); e.Status != entitlement.StatusRevoked {
		t.Errorf("entitlement after the dispute: %s, want revoked", e.Status)
	}
	if n, r := countEvents(t, s, event.PaymentDisputed), countEvents(t, s, event.EntitlementRevoked); n != 1 || r != 1 {
		t.Errorf("events: %d payment.disputed, %d entitlement.revoked; want 1 and 1", n, r)
	}
	clock.Advance(time.Minute)
	again, err := s.DisputePayment(ctx, p.ID, store.PaymentChange{Reason: "again"})
	if err != nil || !again.DisputedAt.Equal(*got.DisputedAt) || again.DisputeReason != ch.Reason {
		t.Errorf("DisputePayment again = %v %q, %v; want the first dispute unchanged", again.DisputedAt, again.DisputeReason, err)
	}
	if n := countEvents(t, s, event.PaymentDisputed); n != 1 {
		t.Errorf("payment.disputed after a repeat: %d, want 1", n)
	}
	pend := createPayment(t, s, stripePayment(agent, "undisputable", 500))
	_, err = s.DisputePayment(ctx, pend.ID, store.PaymentChange{Reason: "early"})
	wantCode(t, "DisputePayment(pending)", err, store.CodeConflict)
	_, err = s.DisputePayment(ctx, "no-such-payment", store.PaymentChange{Reason: "early"})
	wantCode(t, "DisputePayment(unknown)", err, store.CodeNotFound)
}

// testPaymentRefundPartCrossesAlert: a partial refund that takes what is
// left to or below an alert's threshold triggers it and writes one
// entitlement.balance_low, as a charge would (issue 29: it wrote none).
func testPaymentRefundPartCrossesAlert(t *testing.T, s store.EntitlementStore, clock *Clock) {
	u, ok := s.(store.EntitlementUpdater)
	if !ok {
		t.Skip("the store does not update entitlements")
	}
	agent := newAgent()
	p, eid := succeeded(t, s, agent, "part-alert", 1000)
	if _, err := u.UpdateEntitlement(t.Context(), eid, entitlement.Update{Alerts: alertsAt(entitlement.Alert{Amount: ptr(usd(500))})}); err != nil {
		t.Fatalf("UpdateEntitlement (alert at 500): %v", err)
	}
	dispatchAll(t, s)
	refundPart(t, s, p.ID, 300, signing) // 700 left: above
	if n := len(pendingEventsOf(t, s, event.EntitlementBalanceLow)); n != 0 {
		t.Fatalf("after a partial refund that left 700: %d balance_low events, want none", n)
	}
	refundPart(t, s, p.ID, 600, signing) // 400 left: crossed
	evs := pendingEventsOf(t, s, event.EntitlementBalanceLow)
	if len(evs) != 1 {
		t.Fatalf("after a partial refund that left 400: %d balance_low events, want 1", len(evs))
	}
	if got := getEntitlement(t, s, eid); got.Credits.Balance != usd(400) || len(got.Alerts) != 1 || !got.Alerts[0].Triggered {
		t.Errorf("after the refunds: balance %v, alerts %+v; want 400 and the alert triggered", got.Credits.Balance, got.Alerts)
	}
}

// testPaymentDisputeWon: a dispute decided for the seller makes what the
// dispute revoked active again, with what it had left (issue 29: a won
// dispute restored nothing); a second call replays; an entitlement revoked
// otherwise stays revoked; a payment never disputed is a conflict.
func testPaymentDisputeWon(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	p, eid := succeeded(t, s, agent, "dispute-won", 1000)
	req := request(agent, "before-dispute", 300)
	req.EntitlementID = eid
	mustConsume(t, s, req)
	clock.Advance(time.Minute)
	if _, err := s.DisputePayment(ctx, p.ID, store.PaymentChange{Reason: "stripe: dispute opened (fraudulent)"}); err != nil {
		t.Fatalf("DisputePayment: %v", err)
	}
	dispatchAll(t, s)
	clock.Advance(time.Hour)
	won, err := s.WinDispute(ctx, p.ID, store.PaymentChange{Inbound: &store.InboundEvent{Source: "stripe", EventID: "evt_won"}})
	if err != nil || won.DisputeWonAt == nil || !won.DisputeWonAt.Equal(clock.Now()) || won.Status != payment.StatusSucceeded {
		t.Fatalf("WinDispute = disputeWonAt %v, status %s, %v; want now, succeeded", won.DisputeWonAt, won.Status, err)
	}
	e := getEntitlement(t, s, eid)
	if e.Status != entitlement.StatusActive || e.RevokedAt != nil || e.Credits.Balance != usd(700) {
		t.Errorf("entitlement after the won dispute: %s, revokedAt %v, balance %v; want active again with the 700 left", e.Status, e.RevokedAt, e.Credits.Balance)
	}
	if n, g := countEvents(t, s, event.PaymentDisputeWon), countEvents(t, s, event.EntitlementGranted); n != 1 || g != 1 {
		t.Errorf("events: %d payment.dispute_won, %d entitlement.granted; want 1 and 1", n, g)
	}
	again, err := s.WinDispute(ctx, p.ID, store.PaymentChange{})
	if err != nil || !again.DisputeWonAt.Equal(*won.DisputeWonAt) {
		t.Errorf("WinDispute again = %v, %v; want the first answer", again.DisputeWonAt, err)
	}
	if n := countEvents(t, s, event.PaymentDisputeWon); n != 1 {
		t.Errorf("payment.dispute_won after a repeat: %d, want 1", n)
	}
	req = request(agent, "after-won", 100)
	req.EntitlementID = eid
	mustConsume(t, s, req)
	other, _ := succeeded(t, s, agent, "never-disputed", 500)
	_, err = s.WinDispute(ctx, other.ID, store.PaymentChange{})
	wantCode(t, "WinDispute(never disputed)", err, store.CodeConflict)
}
