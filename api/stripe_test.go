package api_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/internal/stripemock"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/stripepay"
)

// withStripe makes the server's Stripe objects at the stripe-mock at base.
func withStripe(tb testing.TB, base string) option {
	c := stripemock.Client(tb, base)
	return func(cfg *api.Config) { cfg.Stripe = c }
}

func checkoutBody(agent string, cents int64) map[string]any {
	return map[string]any{
		"agentId": agent, "amount": map[string]any{"cents": cents, "currency": "USD"}, "description": "100 searches",
		"grant":      map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}},
		"successUrl": "https://app.example/paid", "cancelUrl": "https://app.example/cancel", "customerEmail": "payer@example.com",
	}
}

func stripePaymentBody(agent string, cents int64) map[string]any {
	b := paymentBody(agent, cents)
	b["provider"] = "stripe"
	return b
}

func (e *env) checkout(key string, body any) response {
	e.t.Helper()
	return e.keyedPost("/v1/checkout-sessions", key, body)
}

type checkoutAnswer struct {
	Payment   payment.Payment
	SessionID string
	URL       string
	ExpiresAt time.Time
}

// TestStripe_Checkout: a Checkout Session made at stripe-mock and its
// pending payment, linked by the session; a retry answers the same
// payment, another body with the key is a 422.
func TestStripe_Checkout(t *testing.T) {
	e := newEnv(t, withStripe(t, stripemock.URL(t)))
	res := e.checkout("co-1", checkoutBody(agentA, 1500))
	if res.Status != http.StatusCreated {
		t.Fatalf("POST /v1/checkout-sessions: %d %s, want 201", res.Status, res.Body)
	}
	var got checkoutAnswer
	res.decode(t, &got)
	p := got.Payment
	if p.Status != payment.StatusPending || p.Provider != payment.ProviderStripe || p.ProviderIntentID != "" {
		t.Errorf("payment = %s %s intent %q, want a pending stripe payment not linked to an intent yet", p.Status, p.Provider, p.ProviderIntentID)
	}
	if p.ID != stripepay.PaymentID("co-1") {
		t.Errorf("payment id %s, want the one derived from its key, %s", p.ID, stripepay.PaymentID("co-1"))
	}
	// stripe-mock answers its fixture: an open session with an ID, a URL and expires_at 1234567890.
	if got.SessionID == "" || got.URL == "" || !got.ExpiresAt.Equal(time.Unix(1234567890, 0)) {
		t.Errorf("session = %q %q %v, want stripe-mock's session, URL and expiry", got.SessionID, got.URL, got.ExpiresAt)
	}
	if p.Checkout == nil || p.Checkout.SessionID != got.SessionID || p.Checkout.URL != got.URL {
		t.Errorf("payment.checkout = %+v, want the session", p.Checkout)
	}
	var stored payment.Payment
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/payments/" + p.ID, Key: e.keys.Billing}).decode(t, &stored)
	if stored.Checkout == nil || stored.Checkout.SessionID != got.SessionID {
		t.Errorf("GET payment: checkout %+v, want session %s", stored.Checkout, got.SessionID)
	}

	var again checkoutAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/checkout-sessions", Key: e.keys.Billing, Body: checkoutBody(agentA, 1500),
		Header: map[string]string{"Idempotency-Key": "co-1"}}).decode(t, &again)
	if again.Payment.ID != p.ID || again.SessionID != got.SessionID {
		t.Errorf("retry = payment %s session %s, want %s %s", again.Payment.ID, again.SessionID, p.ID, got.SessionID)
	}
	if r := e.checkout("co-1", checkoutBody(agentA, 1600)); r.Status != http.StatusUnprocessableEntity {
		t.Errorf("same key, other amount: %d %s, want 422", r.Status, r.Body)
	}
	if r := e.checkout("", checkoutBody(agentA, 1500)); r.Status != http.StatusBadRequest {
		t.Errorf("no Idempotency-Key: %d, want 400", r.Status)
	}
}

// TestStripe_CheckoutInvalid: input Stripe would refuse is a 400 naming the
// field, answered before any call to Stripe (the server's Stripe URL
// answers nothing).
func TestStripe_CheckoutInvalid(t *testing.T) {
	e := newEnv(t, withStripe(t, "http://127.0.0.1:1"))
	for _, tc := range []struct {
		name  string
		edit  func(b map[string]any)
		field string
	}{
		{"BelowMinimum", func(b map[string]any) { b["amount"] = map[string]any{"cents": 49, "currency": "USD"} }, "amount.cents"},
		{"BelowMinimumGBP", func(b map[string]any) { b["amount"] = map[string]any{"cents": 29, "currency": "GBP"} }, "amount.cents"},
		{"AboveMaximum", func(b map[string]any) { b["amount"] = map[string]any{"cents": 100_000_000, "currency": "USD"} }, "amount.cents"},
		{"Currency", func(b map[string]any) { b["amount"] = map[string]any{"cents": 1500, "currency": "usd"} }, "amount.currency"},
		{"SuccessURLMissing", func(b map[string]any) { delete(b, "successUrl") }, "successUrl"},
		{"SuccessURLRelative", func(b map[string]any) { b["successUrl"] = "/paid" }, "successUrl"},
		{"SuccessURLScheme", func(b map[string]any) { b["successUrl"] = "javascript:alert(1)" }, "successUrl"},
		{"CancelURL", func(b map[string]any) { b["cancelUrl"] = "ftp://app.example/x" }, "cancelUrl"},
		{"Email", func(b map[string]any) { b["customerEmail"] = "not an email" }, "customerEmail"},
		{"UnknownField", func(b map[string]any) { b["mode"] = "subscription" }, "mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := checkoutBody(agentA, 1500)
			tc.edit(b)
			res := e.with(t).checkout("bad-"+tc.name, b)
			if res.Status != http.StatusBadRequest {
				t.Fatalf("status %d %s, want 400", res.Status, res.Body)
			}
			if p := res.problem(t); len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
				t.Errorf("errors = %+v, want field %q", p.Errors, tc.field)
			}
		})
	}
}

// TestStripe_IntentPayment: POST /v1/payments for provider stripe without
// an intent makes the PaymentIntent and answers its client secret; a retry
// reads it again; GET /v1/payments?providerIntentId= finds the payment.
func TestStripe_IntentPayment(t *testing.T) {
	e := newEnv(t, withStripe(t, stripemock.URL(t)))
	var got struct {
		payment.Payment
		ClientSecret string
	}
	res := e.createPayment("pi-1", stripePaymentBody(agentA, 1500))
	if res.Status != http.StatusCreated {
		t.Fatalf("POST /v1/payments: %d %s, want 201", res.Status, res.Body)
	}
	res.decode(t, &got)
	if got.ProviderIntentID == "" || got.ClientSecret == "" || got.Status != payment.StatusPending {
		t.Fatalf("payment = intent %q secret %q status %s, want a pending payment linked to stripe-mock's intent with its secret",
			got.ProviderIntentID, got.ClientSecret, got.Status)
	}
	var again struct {
		payment.Payment
		ClientSecret string
	}
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: stripePaymentBody(agentA, 1500),
		Header: map[string]string{"Idempotency-Key": "pi-1"}}).decode(t, &again)
	if again.ID != got.ID || again.ClientSecret == "" {
		t.Errorf("retry = %s secret %q, want payment %s with a secret", again.ID, again.ClientSecret, got.ID)
	}
	var found struct{ Items []payment.Payment }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/payments?providerIntentId=" + got.ProviderIntentID, Key: e.keys.Billing}).decode(t, &found)
	if len(found.Items) != 1 || found.Items[0].ID != got.ID {
		t.Errorf("GET /v1/payments?providerIntentId= = %+v, want payment %s", found.Items, got.ID)
	}
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/payments?providerIntentId=pi_nobody", Key: e.keys.Billing}).decode(t, &found)
	if len(found.Items) != 0 {
		t.Errorf("unknown intent: %d payments, want none", len(found.Items))
	}
	if p := e.must(http.StatusBadRequest, req{Method: "GET", Path: "/v1/payments", Key: e.keys.Billing}).problem(t); p.Errors[0].Field != "providerIntentId" {
		t.Errorf("no providerIntentId: errors %+v, want the parameter named", p.Errors)
	}
	e.must(http.StatusForbidden, req{Method: "GET", Path: "/v1/payments?providerIntentId=x", Key: e.keys.Host})
}

// TestStripe_ProviderEnforced: a manual payment carries no intent; a
// stripe payment always has one, so without a Stripe key it must be given.
func TestStripe_ProviderEnforced(t *testing.T) {
	e := newEnv(t)
	manual := paymentBody(agentA, 500)
	manual["providerIntentId"] = "pi_x"
	if p := e.createPayment("m-1", manual).problem(t); p.Status != 400 || p.Errors[0].Field != "providerIntentId" {
		t.Errorf("manual with intent: %d %+v, want 400 naming providerIntentId", p.Status, p.Errors)
	}
	if p := e.createPayment("s-1", stripePaymentBody(agentA, 500)).problem(t); p.Status != 400 || p.Errors[0].Field != "providerIntentId" {
		t.Errorf("stripe without intent, no Stripe key: %d %+v, want 400 naming providerIntentId", p.Status, p.Errors)
	}
	if p := e.checkout("c-1", checkoutBody(agentA, 1500)).problem(t); p.Status != 503 {
		t.Errorf("checkout without a Stripe key: %d, want 503", p.Status)
	}
}

// TestStripe_APIError: Stripe's error is a 502 carrying its request ID,
// and no payment is left behind; so is an unreachable Stripe.
func TestStripe_APIError(t *testing.T) {
	base := stripemock.URL(t)
	for _, tc := range []struct {
		name, url, requestID string
	}{
		// stripe-mock answers 404 invalid_request_error with Request-Id req_123 for a path it does not know.
		{"Refused", stripemock.Misrouted(t, base), "req_123"},
		{"Unreachable", "http://127.0.0.1:1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, withStripe(t, tc.url))
			for _, r := range []response{e.checkout("err-co", checkoutBody(agentA, 1500)), e.createPayment("err-pi", stripePaymentBody(agentA, 1500))} {
				p := r.problem(t)
				if p.Status != http.StatusBadGateway || p.Type != "https://stipend-mcp.github.io/stipend/problems/provider-error" || p.ProviderRequestID != tc.requestID {
					t.Errorf("answer %d %s providerRequestId %q, want 502 provider-error with %q", p.Status, p.Type, p.ProviderRequestID, tc.requestID)
				}
			}
			for _, key := range []string{"err-co", "err-pi"} {
				if _, err := e.store.FindPaymentByIdempotencyKey(t.Context(), key); err == nil {
					t.Errorf("key %s: a payment was created", key)
				}
			}
		})
	}
}

// exerciseStripeRoutes answers the Stripe routes with a 2xx for
// TestOpenAPI_Responses, on a server that makes Stripe objects at
// stripe-mock. It returns false when stripe-mock is absent (outside CI).
func exerciseStripeRoutes(t *testing.T, seen *sync.Map) bool {
	ran := false
	t.Run("StripeRoutes", func(t *testing.T) {
		e := newEnv(t, withStripe(t, stripemock.URL(t)))
		e.seen = seen
		e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/checkout-sessions", Key: e.keys.Billing, Body: checkoutBody(agentA, 1500),
			Header: map[string]string{"Idempotency-Key": "spec-co"}})
		e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: stripePaymentBody(agentA, 1500),
			Header: map[string]string{"Idempotency-Key": "spec-pi"}})
		e.must(http.StatusOK, req{Method: "GET", Path: "/v1/payments?providerIntentId=pi_none", Key: e.keys.Billing})
		bad := newEnv(t, withStripe(t, stripemock.Misrouted(t, stripemock.URL(t))))
		bad.seen = seen
		bad.must(http.StatusBadGateway, req{Method: "POST", Path: "/v1/checkout-sessions", Key: e.keys.Billing, Body: checkoutBody(agentA, 1500),
			Header: map[string]string{"Idempotency-Key": "spec-bad"}})
		ran = true
	})
	return ran
}
