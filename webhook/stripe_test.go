package webhook_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
	"github.com/stipend-mcp/stipend/webhook"
)

const stripeSecret = "whsec_stripe_test_secret"

// pureSign stands in for the receipt signer: pure, as stores require.
func pureSign(r receipt.Receipt) (string, error) {
	sum := sha256.Sum256([]byte(r.ID + r.PaymentID))
	return "test." + hex.EncodeToString(sum[:]), nil
}

type stripeEnv struct {
	store   *memory.Store
	handler *webhook.Stripe
}

func newStripeEnv(t *testing.T) *stripeEnv {
	t.Helper()
	s := memory.New()
	return &stripeEnv{store: s, handler: &webhook.Stripe{
		Payments: s, Secret: stripeSecret, Issuer: "https://stipend.test", Sign: pureSign,
		Logger: slog.New(slog.DiscardHandler),
	}}
}

// payment creates a pending Stripe payment of a credits grant linked to intent.
func (e *stripeEnv) payment(t *testing.T, intent string) payment.Payment {
	t.Helper()
	res, err := e.store.CreatePayment(context.Background(), payment.Payment{
		AgentID: "agent-1", Amount: money.Money{Cents: 1500, Currency: "USD"}, Provider: payment.ProviderStripe,
		ProviderIntentID: intent,
		Grant:            payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
		IdempotencyKey:   "key-" + intent, Fingerprint: "fp-" + intent,
	})
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	return res.Payment
}

// stripeEvent returns a Stripe event payload of type typ with object as data.object.
func stripeEvent(id, typ, object string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2025-03-31.basil","type":%q,"data":{"object":%s}}`, id, typ, object))
}

// deliver signs payload as Stripe does at ts and hands it to the handler.
func (e *stripeEnv) deliver(t *testing.T, payload []byte, ts time.Time) (int, error) {
	t.Helper()
	signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: payload, Secret: stripeSecret, Timestamp: ts,
	})
	return e.handler.Handle(context.Background(), signed.Payload, signed.Header)
}

func (e *stripeEnv) mustDeliver(t *testing.T, payload []byte, want int) {
	t.Helper()
	if got, err := e.deliver(t, payload, time.Now()); got != want {
		t.Fatalf("Handle(%s) = %d (%v), want %d", payload, got, err, want)
	}
}

func (e *stripeEnv) status(t *testing.T, id string) payment.Payment {
	t.Helper()
	p, err := e.store.GetPayment(context.Background(), id)
	if err != nil {
		t.Fatalf("GetPayment: %v", err)
	}
	return p
}

func (e *stripeEnv) pendingEvents(t *testing.T) int {
	t.Helper()
	evs, err := e.store.PendingEvents(context.Background(), 1000)
	if err != nil {
		t.Fatalf("PendingEvents: %v", err)
	}
	return len(evs)
}

func TestStripe_SucceededCompletesOnce(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_1")
	ev := stripeEvent("evt_1", webhook.StripePaymentSucceeded, `{"id":"pi_1","object":"payment_intent","amount_received":1500,"currency":"usd"}`)
	e.mustDeliver(t, ev, http.StatusOK)
	got := e.status(t, p.ID)
	if got.Status != payment.StatusSucceeded || got.ReceiptID == "" || len(got.EntitlementIDs) != 1 {
		t.Fatalf("after payment_intent.succeeded: %s, receipt %q, %d entitlements; want succeeded with a receipt and 1 entitlement",
			got.Status, got.ReceiptID, len(got.EntitlementIDs))
	}
	events := e.pendingEvents(t)
	for range 3 { // Stripe redelivers
		e.mustDeliver(t, ev, http.StatusOK)
	}
	after := e.status(t, p.ID)
	if after.UpdatedAt != got.UpdatedAt || len(after.EntitlementIDs) != 1 {
		t.Errorf("a redelivered event changed the payment: updated %v → %v, entitlements %d", got.UpdatedAt, after.UpdatedAt, len(after.EntitlementIDs))
	}
	if n := e.pendingEvents(t); n != events {
		t.Errorf("outbox events after redeliveries = %d, want %d (nothing new)", n, events)
	}
	ents, _, err := e.store.ListEntitlements(context.Background(), "agent-1", store.EntitlementFilter{}, store.Page{})
	if err != nil || len(ents) != 1 {
		t.Errorf("entitlements of the agent = %d, %v; want 1", len(ents), err)
	}
}

// TestStripe_FailedAttemptThenSuccess is a declined card followed by a
// second card on the same intent: the failed attempt leaves the payment
// pending, and the success completes it.
func TestStripe_FailedAttemptThenSuccess(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_2")
	e.mustDeliver(t, stripeEvent("evt_2", webhook.StripePaymentFailed,
		`{"id":"pi_2","object":"payment_intent","status":"requires_payment_method","last_payment_error":{"message":"Your card was declined."}}`), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusPending {
		t.Fatalf("after payment_failed: %s, want pending (the customer may pay with another method)", got.Status)
	}
	e.mustDeliver(t, stripeEvent("evt_2b", webhook.StripePaymentSucceeded, `{"id":"pi_2","object":"payment_intent","status":"succeeded","amount_received":1500,"currency":"usd"}`), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusSucceeded || len(got.EntitlementIDs) != 1 {
		t.Errorf("after the second attempt succeeded: %s with %d entitlements, want succeeded with 1", got.Status, len(got.EntitlementIDs))
	}
}

// TestStripe_Canceled: a canceled intent fails the payment, with the reason;
// the payment can no longer succeed.
func TestStripe_Canceled(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_6")
	cancel := stripeEvent("evt_6", webhook.StripePaymentCanceled,
		`{"id":"pi_6","object":"payment_intent","status":"canceled","cancellation_reason":"abandoned","last_payment_error":{"message":"Your card was declined."}}`)
	e.mustDeliver(t, cancel, http.StatusOK)
	got := e.status(t, p.ID)
	if got.Status != payment.StatusFailed || !strings.Contains(got.FailureReason, "abandoned") || !strings.Contains(got.FailureReason, "declined") {
		t.Fatalf("after payment_intent.canceled: %s (%q); want failed, naming the cancellation reason and the last error", got.Status, got.FailureReason)
	}
	e.mustDeliver(t, cancel, http.StatusOK) // redelivered: nothing changes
	if again := e.status(t, p.ID); again.UpdatedAt != got.UpdatedAt {
		t.Errorf("a redelivered cancellation changed the payment: updated %v → %v", got.UpdatedAt, again.UpdatedAt)
	}
	if code, _ := e.deliver(t, stripeEvent("evt_6s", webhook.StripePaymentSucceeded, `{"id":"pi_6"}`), time.Now()); code != http.StatusConflict {
		t.Errorf("success of a canceled payment = %d, want 409", code)
	}
	// A refund of the failed payment has nothing to revoke: acknowledged.
	e.mustDeliver(t, stripeEvent("evt_6r", webhook.StripeChargeRefunded, `{"id":"ch_6","payment_intent":"pi_6","refunded":true}`), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusFailed {
		t.Errorf("after a refund of the failed payment: %s, want failed", got.Status)
	}
}

// TestStripe_AmountMismatch: an intent that received less (or another
// currency) than the payment is not completed; the right amount is.
func TestStripe_AmountMismatch(t *testing.T) {
	e := newStripeEnv(t) // payments of 1500 USD
	p := e.payment(t, "pi_7")
	for _, obj := range []string{
		`{"id":"pi_7","object":"payment_intent","amount_received":1000,"currency":"usd"}`,
		`{"id":"pi_7","object":"payment_intent","amount_received":1500,"currency":"eur"}`,
	} {
		if code, err := e.deliver(t, stripeEvent("evt_7", webhook.StripePaymentSucceeded, obj), time.Now()); code != http.StatusConflict {
			t.Errorf("success with %s = %d (%v), want 409", obj, code, err)
		}
	}
	if got := e.status(t, p.ID); got.Status != payment.StatusPending {
		t.Fatalf("after mismatched successes: %s, want pending", got.Status)
	}
	e.mustDeliver(t, stripeEvent("evt_7", webhook.StripePaymentSucceeded,
		`{"id":"pi_7","object":"payment_intent","amount_received":1500,"currency":"usd"}`), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusSucceeded {
		t.Errorf("after the matching success: %s, want succeeded", got.Status)
	}
}

// TestStripe_SuccessWithoutCurrency: a signed success that names no
// currency says nothing about what Stripe received, so it grants nothing
// (409, Stripe retries), for an intent and for a Checkout Session alike.
func TestStripe_SuccessWithoutCurrency(t *testing.T) {
	e := newStripeEnv(t) // payments of 1500 USD
	intent := e.payment(t, "pi_nocur")
	checkout := e.checkoutPayment(t, "nocur")
	for _, tc := range []struct {
		name, typ, object string
		id                string
	}{
		{"payment_intent amount 1", webhook.StripePaymentSucceeded, `{"id":"pi_nocur","object":"payment_intent","amount_received":1}`, intent.ID},
		{"payment_intent full amount", webhook.StripePaymentSucceeded, `{"id":"pi_nocur","object":"payment_intent","amount_received":1500}`, intent.ID},
		{"checkout session", webhook.StripeCheckoutCompleted,
			`{"id":"cs_nocur","object":"checkout.session","status":"complete","payment_status":"paid","amount_total":1,` +
				`"metadata":{"stipend_payment_id":"nocur"},"payment_intent":"pi_cs_nocur"}`, checkout.ID},
	} {
		if code, err := e.deliver(t, stripeEvent("evt_nocur", tc.typ, tc.object), time.Now()); code != http.StatusConflict || err == nil {
			t.Errorf("%s: success without currency = %d (%v), want 409 with an error", tc.name, code, err)
		}
		if got := e.status(t, tc.id); got.Status != payment.StatusPending || len(got.EntitlementIDs) != 0 {
			t.Errorf("%s: payment after a success without currency: %s with %d entitlements, want pending with none",
				tc.name, got.Status, len(got.EntitlementIDs))
		}
	}
}

func TestStripe_ChargeRefunded(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_3")
	refund := stripeEvent("evt_r", webhook.StripeChargeRefunded, `{"id":"ch_3","object":"charge","payment_intent":"pi_3","refunded":true}`)
	// A refund that overtakes the success is refused, so Stripe retries it.
	if got, _ := e.deliver(t, refund, time.Now()); got != http.StatusConflict {
		t.Errorf("refund before success = %d, want 409", got)
	}
	e.mustDeliver(t, stripeEvent("evt_s", webhook.StripePaymentSucceeded, `{"id":"pi_3","amount_received":1500,"currency":"usd"}`), http.StatusOK)
	e.mustDeliver(t, stripeEvent("evt_partial", webhook.StripeChargeRefunded, `{"id":"ch_3","payment_intent":"pi_3","refunded":false}`), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusSucceeded {
		t.Fatalf("after a partial refund: %s, want succeeded (ignored)", got.Status)
	}
	e.mustDeliver(t, refund, http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusRefunded || got.RefundReceiptID == "" {
		t.Errorf("after charge.refunded: %s, refund receipt %q; want refunded with a receipt", got.Status, got.RefundReceiptID)
	}
	e.mustDeliver(t, refund, http.StatusOK)
	// A stale failed attempt or cancellation of a settled payment is
	// acknowledged and changes nothing.
	e.mustDeliver(t, stripeEvent("evt_f", webhook.StripePaymentFailed, `{"id":"pi_3","amount_received":1500,"currency":"usd"}`), http.StatusOK)
	e.mustDeliver(t, stripeEvent("evt_c", webhook.StripePaymentCanceled, `{"id":"pi_3","amount_received":1500,"currency":"usd"}`), http.StatusOK)
	if got := e.status(t, p.ID); got.Status != payment.StatusRefunded {
		t.Errorf("after a stale failure and cancellation: %s, want refunded", got.Status)
	}
}

func TestStripe_IgnoredEvents(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_4")
	for _, ev := range [][]byte{
		stripeEvent("evt_u", "customer.created", `{"id":"cus_1"}`),
		stripeEvent("evt_x", webhook.StripePaymentSucceeded, `{"id":"pi_unknown"}`),
	} {
		e.mustDeliver(t, ev, http.StatusOK)
	}
	if got := e.status(t, p.ID); got.Status != payment.StatusPending {
		t.Errorf("payment after ignored events: %s, want pending", got.Status)
	}
}

func TestStripe_Refused(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_5")
	ev := stripeEvent("evt_5", webhook.StripePaymentSucceeded, `{"id":"pi_5","amount_received":1500,"currency":"usd"}`)
	good := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: ev, Secret: stripeSecret})
	wrong := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: ev, Secret: "whsec_other"})
	old := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: ev, Secret: stripeSecret, Timestamp: time.Now().Add(-6 * time.Minute)})
	for _, tc := range []struct {
		name    string
		handler *webhook.Stripe
		payload []byte
		header  string
		want    int
	}{
		{"NoHeader", e.handler, ev, "", http.StatusBadRequest},
		{"WrongSecret", e.handler, ev, wrong.Header, http.StatusBadRequest},
		{"TooOld", e.handler, ev, old.Header, http.StatusBadRequest},
		{"ChangedBody", e.handler, append([]byte(" "), ev...), good.Header, http.StatusBadRequest},
		{"NoSecretConfigured", &webhook.Stripe{Payments: e.store}, ev, good.Header, http.StatusServiceUnavailable},
	} {
		got, err := tc.handler.Handle(context.Background(), tc.payload, tc.header)
		if got != tc.want || err == nil {
			t.Errorf("%s: Handle = %d, %v; want %d with an error", tc.name, got, err, tc.want)
		}
	}
	if got := e.status(t, p.ID); got.Status != payment.StatusPending {
		t.Errorf("payment after refused events: %s, want pending", got.Status)
	}
	// Within the 5-minute tolerance the event is accepted.
	if got, err := e.deliver(t, ev, time.Now().Add(-4*time.Minute)); got != http.StatusOK {
		t.Errorf("event signed 4 minutes ago = %d (%v), want 200", got, err)
	}
}

// TestStripe_FutureTimestamp: the tolerance applies ahead of the clock too,
// so a signature made for later (a replay prepared in advance, or a clock
// far off) is refused.
func TestStripe_FutureTimestamp(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_future")
	ev := stripeEvent("evt_future", webhook.StripePaymentSucceeded, `{"id":"pi_future","amount_received":1500,"currency":"usd"}`)
	for _, ahead := range []time.Duration{6 * time.Minute, 24 * time.Hour, 10 * 365 * 24 * time.Hour} {
		if got, err := e.deliver(t, ev, time.Now().Add(ahead)); got != http.StatusBadRequest || err == nil {
			t.Errorf("event signed %s ahead: Handle = %d, %v; want 400 with an error", ahead, got, err)
		}
	}
	if got := e.status(t, p.ID); got.Status != payment.StatusPending {
		t.Fatalf("payment after future-signed events: %s, want pending", got.Status)
	}
	if got, err := e.deliver(t, ev, time.Now().Add(4*time.Minute)); got != http.StatusOK {
		t.Errorf("event signed 4 minutes ahead (within the tolerance) = %d (%v), want 200", got, err)
	}
}

// TestStripe_CanceledReasonCleaned: a cancellation's reason is stored as
// POST /v1/payments/{id}/fail stores one: no control characters, at most
// payment.MaxFailureReasonLen characters.
func TestStripe_CanceledReasonCleaned(t *testing.T) {
	e := newStripeEnv(t)
	p := e.payment(t, "pi_long")
	msg := strings.Repeat("declined\\u0000\\u001b[2J ", 500) // JSON escapes: NUL and ESC in the decoded text
	e.mustDeliver(t, stripeEvent("evt_long", webhook.StripePaymentCanceled,
		`{"id":"pi_long","cancellation_reason":"abandoned","last_payment_error":{"message":"`+msg+`"}}`), http.StatusOK)
	got := e.status(t, p.ID)
	if got.Status != payment.StatusFailed {
		t.Fatalf("after payment_intent.canceled: %s, want failed", got.Status)
	}
	if n := len([]rune(got.FailureReason)); n > payment.MaxFailureReasonLen {
		t.Errorf("failureReason: %d characters, want at most %d", n, payment.MaxFailureReasonLen)
	}
	if strings.ContainsAny(got.FailureReason, "\x00\x1b") {
		t.Errorf("failureReason %q holds control characters", got.FailureReason)
	}
	if !strings.HasPrefix(got.FailureReason, "stripe: payment canceled (abandoned); last attempt: declined [2J declined") {
		t.Errorf("failureReason = %q, want the cancellation reason and the cleaned message", got.FailureReason)
	}
}
