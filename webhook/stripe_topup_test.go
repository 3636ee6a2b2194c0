package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/stripepay"
	"github.com/stipend-mcp/stipend/topup"
)

// beginTopUp enables top-up of agent-1 and begins one, linked to intent,
// as stripepay.TopUps does before the intent's events arrive.
func (e *stripeEnv) beginTopUp(t *testing.T, intent string) payment.Payment {
	t.Helper()
	ctx := context.Background()
	usd := func(c int64) money.Money { return money.Money{Cents: c, Currency: "USD"} }
	if _, err := e.store.SaveTopUpMethod(ctx, "agent-1", topup.Method{Customer: "cus_1", PaymentMethod: "pm_1"}); err != nil {
		t.Fatalf("SaveTopUpMethod: %v", err)
	}
	if _, err := e.store.PutTopUp(ctx, "agent-1", topup.Settings{Threshold: usd(500), Amount: usd(1500), DailyCap: usd(9000),
		Scope: entitlement.Scope{Service: "search"}}); err != nil {
		t.Fatalf("PutTopUp: %v", err)
	}
	tu, err := e.store.GetTopUp(ctx, "agent-1")
	if err != nil {
		t.Fatalf("GetTopUp: %v", err)
	}
	p, err := e.store.BeginTopUp(ctx, "agent-1", tu.Seq)
	if err != nil {
		t.Fatalf("BeginTopUp: %v", err)
	}
	if p, err = e.store.LinkProviderIntent(ctx, p.ID, intent); err != nil {
		t.Fatalf("LinkProviderIntent: %v", err)
	}
	return p
}

// offSessionIntent is a top-up's PaymentIntent in status, with its
// metadata and, for a refused one, Stripe's last_payment_error.
func offSessionIntent(id, paymentID, status string) string {
	lastError := "null"
	if status == "requires_payment_method" {
		lastError = `{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds."}`
	}
	return fmt.Sprintf(`{"id":%q,"object":"payment_intent","status":%q,"amount":1500,"amount_received":%d,"currency":"usd",
		"metadata":{%q:%q,%q:"true"},"last_payment_error":%s}`,
		id, status, map[bool]int{true: 1500}[status == "succeeded"], payment.MetadataKey, paymentID, stripepay.TopUpMetadataKey, lastError)
}

// TestStripe_TopUpPaymentFailed: payment_intent.payment_failed of a
// top-up's off-session intent fails its payment and writes topup.failed,
// once however often it is delivered; the same event about a payment a
// payer is paying leaves it pending.
func TestStripe_TopUpPaymentFailed(t *testing.T) {
	e := newStripeEnv(t)
	p := e.beginTopUp(t, "pi_topup_1")
	ev := stripeEvent("evt_topup_failed", "payment_intent.payment_failed", offSessionIntent("pi_topup_1", p.ID, "requires_payment_method"))
	e.mustDeliver(t, ev, http.StatusOK)
	e.mustDeliver(t, ev, http.StatusOK)
	got := e.status(t, p.ID)
	if got.Status != payment.StatusFailed || got.FailureReason != "stripe: card_declined/insufficient_funds: Your card has insufficient funds." {
		t.Errorf("payment = %s %q, want failed with Stripe's decline", got.Status, got.FailureReason)
	}
	tu, err := e.store.GetTopUp(context.Background(), "agent-1")
	if err != nil || tu.PendingPaymentID != "" || tu.Failures != 1 {
		t.Errorf("top-up = pending %q, failures %d, %v; want none pending, 1 failure", tu.PendingPaymentID, tu.Failures, err)
	}
	evs, err := e.store.PendingEvents(context.Background(), store.MaxPageSize)
	if err != nil {
		t.Fatal(err)
	}
	var failures []topup.Failure
	for _, ev := range evs {
		if ev.Type == event.TopUpFailed {
			var f topup.Failure
			if err := json.Unmarshal(ev.Data, &f); err != nil {
				t.Fatal(err)
			}
			failures = append(failures, f)
		}
	}
	if len(failures) != 1 || failures[0].PaymentID != p.ID || failures[0].ConsecutiveFailures != 1 || failures[0].Disabled {
		t.Errorf("topup.failed events = %+v, want one, of %s, the first failure, not disabling", failures, p.ID)
	}

	// The same event of a payment the payer is paying is a failed attempt.
	other := e.payment(t, "pi_payer")
	e.mustDeliver(t, stripeEvent("evt_attempt", "payment_intent.payment_failed",
		fmt.Sprintf(`{"id":"pi_payer","object":"payment_intent","status":"requires_payment_method","metadata":{%q:%q}}`, payment.MetadataKey, other.ID)), http.StatusOK)
	if got := e.status(t, other.ID); got.Status != payment.StatusPending {
		t.Errorf("payer's payment after a failed attempt = %s, want pending", got.Status)
	}
}

// TestStripe_TopUpSucceeded: payment_intent.succeeded of a top-up grants
// it and ends the pending top-up.
func TestStripe_TopUpSucceeded(t *testing.T) {
	e := newStripeEnv(t)
	p := e.beginTopUp(t, "pi_topup_2")
	e.mustDeliver(t, stripeEvent("evt_topup_ok", "payment_intent.succeeded", offSessionIntent("pi_topup_2", p.ID, "succeeded")), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusSucceeded || len(got.EntitlementIDs) != 1 {
		t.Errorf("payment = %s with %d grants, want succeeded with one", got.Status, len(got.EntitlementIDs))
	}
	if tu, err := e.store.GetTopUp(context.Background(), "agent-1"); err != nil || tu.PendingPaymentID != "" || tu.Failures != 0 {
		t.Errorf("top-up = pending %q, failures %d, %v; want settled", tu.PendingPaymentID, tu.Failures, err)
	}
}

// TestStripe_SavesMethodForTopUp: the success of a payment whose intent
// was made with setup_future_usage=off_session (a Checkout Session with
// saveForTopUp) saves its customer and payment method for top-up.
func TestStripe_SavesMethodForTopUp(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_saved")
	e.mustDeliver(t, stripeEvent("evt_saved", "payment_intent.succeeded", fmt.Sprintf(
		`{"id":"pi_saved","object":"payment_intent","status":"succeeded","amount":1500,"amount_received":1500,"currency":"usd",
		"setup_future_usage":"off_session","customer":"cus_saved","payment_method":"pm_saved","metadata":{%q:%q}}`, payment.MetadataKey, p.ID)), http.StatusOK)
	tu, err := e.store.GetTopUp(context.Background(), "agent-1")
	if err != nil || tu.Method == nil || *tu.Method != (topup.Method{Customer: "cus_saved", PaymentMethod: "pm_saved"}) {
		t.Errorf("top-up method = %+v, %v; want cus_saved and pm_saved", tu.Method, err)
	}
	// Without setup_future_usage nothing is saved.
	e2 := newStripeEnv(t)
	p2 := e2.payment(t, "pi_once")
	e2.mustDeliver(t, stripeEvent("evt_once", "payment_intent.succeeded", fmt.Sprintf(
		`{"id":"pi_once","object":"payment_intent","status":"succeeded","amount":1500,"amount_received":1500,"currency":"usd",
		"customer":"cus_once","payment_method":"pm_once","metadata":{%q:%q}}`, payment.MetadataKey, p2.ID)), http.StatusOK)
	if tu, err := e2.store.GetTopUp(context.Background(), "agent-1"); err != nil || tu.Method != nil {
		t.Errorf("top-up method without setup_future_usage = %+v, %v; want none", tu.Method, err)
	}
}
