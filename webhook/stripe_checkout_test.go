package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/webhook"
)

// checkoutPayment creates a pending Stripe payment made through a Checkout
// Session, as POST /v1/checkout-sessions does: no intent yet.
func (e *stripeEnv) checkoutPayment(t *testing.T, id string) payment.Payment {
	t.Helper()
	res, err := e.store.CreatePayment(context.Background(), payment.Payment{
		ID: id, AgentID: "agent-1", Amount: money.Money{Cents: 1500, Currency: "USD"}, Provider: payment.ProviderStripe,
		Grant:          payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
		Checkout:       &payment.Checkout{SessionID: "cs_" + id, URL: "https://checkout.stripe.com/c/pay/cs_" + id},
		IdempotencyKey: "key-" + id, Fingerprint: "fp-" + id,
	})
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	return res.Payment
}

// session is a Checkout Session object of payment id, with its intent.
func session(id, status, paymentStatus string) string {
	return fmt.Sprintf(`{"id":"cs_%s","object":"checkout.session","mode":"payment","status":%q,"payment_status":%q,`+
		`"amount_total":1500,"currency":"usd","client_reference_id":%q,"metadata":{"stipend_payment_id":%q},"payment_intent":"pi_%s"}`,
		id, status, paymentStatus, id, id, id)
}

// receipts counts the receipts of agent-1.
func (e *stripeEnv) receipts(t *testing.T) int {
	t.Helper()
	rs, _, err := e.store.ListReceipts(context.Background(), "agent-1", store.Page{})
	if err != nil {
		t.Fatalf("ListReceipts: %v", err)
	}
	return len(rs)
}

func TestStripe_CheckoutCompleted(t *testing.T) {
	e := newStripeEnv(t)
	p := e.checkoutPayment(t, "co1")
	done := stripeEvent("evt_co1", webhook.StripeCheckoutCompleted, session("co1", "complete", "paid"))
	e.mustDeliver(t, done, http.StatusOK)
	got := e.status(t, p.ID)
	if got.Status != payment.StatusSucceeded || got.ProviderIntentID != "pi_co1" {
		t.Fatalf("after checkout.session.completed: %s intent %q, want succeeded and linked to pi_co1", got.Status, got.ProviderIntentID)
	}
	events := e.pendingEvents(t)
	// A redelivery, the intent's own success and the async success change nothing more.
	e.mustDeliver(t, done, http.StatusOK)
	e.mustDeliver(t, stripeEvent("evt_co1_pi", webhook.StripePaymentSucceeded,
		`{"id":"pi_co1","object":"payment_intent","status":"succeeded","amount_received":1500,"currency":"usd","metadata":{"stipend_payment_id":"co1"}}`), http.StatusOK)
	if n := e.pendingEvents(t); n != events || e.receipts(t) != 1 {
		t.Errorf("after duplicates: %d events (want %d) and %d receipts (want 1)", n, events, e.receipts(t))
	}
	// The charge is found by the intent the session linked.
	e.mustDeliver(t, stripeEvent("evt_co1_r", webhook.StripeChargeRefunded, `{"id":"ch_co1","object":"charge","payment_intent":"pi_co1","refunded":true}`), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusRefunded {
		t.Errorf("after charge.refunded: %s, want refunded", got.Status)
	}
}

func TestStripe_CheckoutAsync(t *testing.T) {
	e := newStripeEnv(t)
	ok := e.checkoutPayment(t, "co2")
	e.mustDeliver(t, stripeEvent("evt_co2", webhook.StripeCheckoutCompleted, session("co2", "complete", "unpaid")), http.StatusOK)
	if got := e.status(t, ok.ID); got.Status != payment.StatusPending || got.ProviderIntentID != "pi_co2" {
		t.Fatalf("after an unpaid completion: %s intent %q, want pending and linked", got.Status, got.ProviderIntentID)
	}
	e.mustDeliver(t, stripeEvent("evt_co2_ok", webhook.StripeCheckoutAsyncSucceeded, session("co2", "complete", "paid")), http.StatusOK)
	if got := e.status(t, ok.ID); got.Status != payment.StatusSucceeded {
		t.Errorf("after async_payment_succeeded: %s, want succeeded", got.Status)
	}

	bad := e.checkoutPayment(t, "co3")
	e.mustDeliver(t, stripeEvent("evt_co3", webhook.StripeCheckoutCompleted, session("co3", "complete", "unpaid")), http.StatusOK)
	e.mustDeliver(t, stripeEvent("evt_co3_no", webhook.StripeCheckoutAsyncFailed, session("co3", "complete", "unpaid")), http.StatusOK)
	if got := e.status(t, bad.ID); got.Status != payment.StatusFailed || got.FailureReason != "stripe: checkout session async payment failed" {
		t.Errorf("after async_payment_failed: %s %q, want failed with the reason", got.Status, got.FailureReason)
	}
}

func TestStripe_CheckoutExpired(t *testing.T) {
	e := newStripeEnv(t)
	p := e.checkoutPayment(t, "co4")
	e.mustDeliver(t, stripeEvent("evt_co4", webhook.StripeCheckoutExpired, session("co4", "expired", "unpaid")), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusFailed || got.FailureReason != "stripe: checkout session expired" {
		t.Errorf("after checkout.session.expired: %s %q, want failed", got.Status, got.FailureReason)
	}
	// An expiry that arrives after the success changes nothing.
	paid := e.checkoutPayment(t, "co5")
	e.mustDeliver(t, stripeEvent("evt_co5", webhook.StripeCheckoutCompleted, session("co5", "complete", "paid")), http.StatusOK)
	e.mustDeliver(t, stripeEvent("evt_co5_x", webhook.StripeCheckoutExpired, session("co5", "expired", "unpaid")), http.StatusOK)
	if got := e.status(t, paid.ID); got.Status != payment.StatusSucceeded {
		t.Errorf("stale expiry: %s, want succeeded", got.Status)
	}
}

// TestStripe_EarlyEvent: an event about an object Stipend made, delivered
// before its payment is stored, is refused so that Stripe delivers it again;
// the redelivery after the payment exists applies it, once.
func TestStripe_EarlyEvent(t *testing.T) {
	e := newStripeEnv(t)
	for _, ev := range [][]byte{
		stripeEvent("evt_early", webhook.StripeCheckoutCompleted, session("early", "complete", "paid")),
		stripeEvent("evt_early_pi", webhook.StripePaymentSucceeded,
			`{"id":"pi_early","object":"payment_intent","status":"succeeded","amount_received":1500,"currency":"usd","metadata":{"stipend_payment_id":"early"}}`),
	} {
		if got, err := e.deliver(t, ev, time.Now()); got != http.StatusConflict || err == nil {
			t.Fatalf("early event: %d (%v), want 409 with an error", got, err)
		}
	}
	p := e.checkoutPayment(t, "early")
	e.mustDeliver(t, stripeEvent("evt_early_pi", webhook.StripePaymentSucceeded,
		`{"id":"pi_early","object":"payment_intent","status":"succeeded","amount_received":1500,"currency":"usd","metadata":{"stipend_payment_id":"early"}}`), http.StatusOK)
	e.mustDeliver(t, stripeEvent("evt_early", webhook.StripeCheckoutCompleted, session("early", "complete", "paid")), http.StatusOK)
	got := e.status(t, p.ID)
	if got.Status != payment.StatusSucceeded || got.ProviderIntentID != "pi_early" || e.receipts(t) != 1 {
		t.Errorf("after redeliveries: %s intent %q, %d receipts; want succeeded, pi_early, 1", got.Status, got.ProviderIntentID, e.receipts(t))
	}
}

// TestStripe_OutOfOrder: a refund that overtakes the success is refused
// (Stripe retries it) and applies after the success.
func TestStripe_OutOfOrder(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_ooo")
	refund := stripeEvent("evt_ooo_r", webhook.StripeChargeRefunded, `{"id":"ch_ooo","object":"charge","payment_intent":"pi_ooo","refunded":true}`)
	if got, _ := e.deliver(t, refund, time.Now()); got != http.StatusConflict {
		t.Fatalf("refund before success: %d, want 409", got)
	}
	e.mustDeliver(t, stripeEvent("evt_ooo", webhook.StripePaymentSucceeded, `{"id":"pi_ooo","object":"payment_intent","status":"succeeded","amount_received":1500,"currency":"usd"}`), http.StatusOK)
	e.mustDeliver(t, refund, http.StatusOK)
	e.mustDeliver(t, refund, http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusRefunded || e.receipts(t) != 2 {
		t.Errorf("after success and refund: %s, %d receipts; want refunded, 2 (payment and refund)", got.Status, e.receipts(t))
	}
}

// TestStripe_NotStipends: objects this Stipend did not make (no metadata,
// no linked intent, another issuer's metadata) are acknowledged and
// ignored, and so are events about a manual payment's intent.
func TestStripe_NotStipends(t *testing.T) {
	e := newStripeEnv(t)
	// Made by another Stipend on the same Stripe account: its issuer is not ours.
	e.mustDeliver(t, stripeEvent("evt_other_issuer", webhook.StripePaymentSucceeded,
		`{"id":"pi_theirs","object":"payment_intent","status":"succeeded","metadata":{"stipend_payment_id":"theirs","stipend_issuer":"https://staging.example"}}`), http.StatusOK)
	e.mustDeliver(t, stripeEvent("evt_other_cs", webhook.StripeCheckoutCompleted,
		`{"id":"cs_other","object":"checkout.session","status":"complete","payment_status":"paid","client_reference_id":"order-7","payment_intent":"pi_other"}`), http.StatusOK)
	res, err := e.store.CreatePayment(context.Background(), payment.Payment{
		AgentID: "agent-1", Amount: money.Money{Cents: 1500, Currency: "USD"}, Provider: payment.ProviderManual, ProviderIntentID: "pi_manual",
		Grant:          payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
		IdempotencyKey: "key-manual", Fingerprint: "fp-manual",
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mustDeliver(t, stripeEvent("evt_manual", webhook.StripePaymentSucceeded, `{"id":"pi_manual","object":"payment_intent","status":"succeeded"}`), http.StatusOK)
	if got := e.status(t, res.Payment.ID); got.Status != payment.StatusPending {
		t.Errorf("manual payment after a Stripe success: %s, want pending (moved by its billing integration only)", got.Status)
	}
}
