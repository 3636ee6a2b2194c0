package webhook_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/webhook"
)

func (e *stripeEnv) balance(t *testing.T, p payment.Payment) (money.Money, entitlement.Status) {
	t.Helper()
	got := e.status(t, p.ID)
	en, err := e.store.GetEntitlement(context.Background(), got.EntitlementIDs[0])
	if err != nil {
		t.Fatalf("GetEntitlement: %v", err)
	}
	return en.Credits.Balance, en.Status
}

// TestStripe_PartialRefunds: each charge.refunded event carries the running
// total; the new part comes off the credits, a later or repeated event
// changes nothing, and the final full refund revokes the rest.
func TestStripe_PartialRefunds(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_part")
	e.mustDeliver(t, stripeEvent("evt_part", webhook.StripePaymentSucceeded, `{"id":"pi_part","object":"payment_intent","status":"succeeded","amount_received":1500,"currency":"usd"}`), http.StatusOK)
	charge := func(id string, refunded int64, full bool) []byte {
		return stripeEvent(id, webhook.StripeChargeRefunded, `{"id":"ch_part","object":"charge","payment_intent":"pi_part","amount":1500,"currency":"usd",`+
			`"amount_refunded":`+strconv.FormatInt(refunded, 10)+`,"refunded":`+map[bool]string{true: "true", false: "false"}[full]+`}`)
	}
	e.mustDeliver(t, charge("evt_r1", 500, false), http.StatusOK)
	if bal, st := e.balance(t, p); bal.Cents != 1000 || st != entitlement.StatusActive {
		t.Fatalf("after refunding 500 of 1500: balance %d %s, want 1000 active", bal.Cents, st)
	}
	e.mustDeliver(t, charge("evt_r2", 900, false), http.StatusOK)
	e.mustDeliver(t, charge("evt_r1", 500, false), http.StatusOK)  // redelivered
	e.mustDeliver(t, charge("evt_r1b", 500, false), http.StatusOK) // overtaken by evt_r2
	if bal, _ := e.balance(t, p); bal.Cents != 600 {
		t.Errorf("after refunds to 900: balance %d, want 600", bal.Cents)
	}
	if got := e.status(t, p.ID); got.Status != payment.StatusSucceeded || got.RefundedAmount == nil || got.RefundedAmount.Cents != 900 {
		t.Errorf("payment: %s refunded %v, want succeeded, 900", got.Status, got.RefundedAmount)
	}
	if n := e.receipts(t); n != 3 {
		t.Errorf("receipts: %d, want 3 (the payment's and two partial refunds')", n)
	}
	e.mustDeliver(t, charge("evt_r3", 1500, true), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusRefunded {
		t.Errorf("after the full refund: %s, want refunded", got.Status)
	}
	if _, st := e.balance(t, p); st != entitlement.StatusRevoked {
		t.Errorf("entitlement after the full refund: %s, want revoked", st)
	}
}

// TestStripe_Dispute: charge.dispute.created revokes the grant with the
// dispute's reason; redelivery changes nothing.
func TestStripe_Dispute(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_dp")
	dispute := stripeEvent("evt_dp", webhook.StripeDisputeCreated,
		`{"id":"dp_1","object":"dispute","amount":1500,"currency":"usd","charge":"ch_dp","payment_intent":"pi_dp","reason":"fraudulent","status":"needs_response"}`)
	if got, _ := e.deliver(t, dispute, time.Now()); got != http.StatusConflict {
		t.Fatalf("dispute before the success: %d, want 409 (Stripe retries)", got)
	}
	e.mustDeliver(t, stripeEvent("evt_dp_ok", webhook.StripePaymentSucceeded, `{"id":"pi_dp","object":"payment_intent","status":"succeeded","amount_received":1500,"currency":"usd"}`), http.StatusOK)
	e.mustDeliver(t, dispute, http.StatusOK)
	e.mustDeliver(t, dispute, http.StatusOK)
	got := e.status(t, p.ID)
	if got.DisputedAt == nil || got.DisputeReason != "stripe: dispute dp_1 opened (fraudulent)" {
		t.Errorf("payment: disputedAt %v reason %q, want the dispute recorded", got.DisputedAt, got.DisputeReason)
	}
	if _, st := e.balance(t, p); st != entitlement.StatusRevoked {
		t.Errorf("entitlement after the dispute: %s, want revoked", st)
	}
	// Closed and lost: nothing changes. Closed and won: the grant is back.
	lost := stripeEvent("evt_dp_lost", webhook.StripeDisputeClosed,
		`{"id":"dp_1","object":"dispute","amount":1500,"currency":"usd","charge":"ch_dp","payment_intent":"pi_dp","reason":"fraudulent","status":"lost"}`)
	e.mustDeliver(t, lost, http.StatusOK)
	if _, st := e.balance(t, p); st != entitlement.StatusRevoked {
		t.Errorf("entitlement after a lost dispute: %s, want revoked", st)
	}
	won := stripeEvent("evt_dp_won", webhook.StripeDisputeClosed,
		`{"id":"dp_1","object":"dispute","amount":1500,"currency":"usd","charge":"ch_dp","payment_intent":"pi_dp","reason":"fraudulent","status":"won"}`)
	e.mustDeliver(t, won, http.StatusOK)
	e.mustDeliver(t, won, http.StatusOK)
	if got := e.status(t, p.ID); got.DisputeWonAt == nil {
		t.Errorf("payment after a won dispute: disputeWonAt %v, want set", got.DisputeWonAt)
	}
	if _, st := e.balance(t, p); st != entitlement.StatusActive {
		t.Errorf("entitlement after a won dispute: %s, want active again", st)
	}
}
