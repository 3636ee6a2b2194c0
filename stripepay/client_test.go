package stripepay_test

import (
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/internal/stripemock"
	"github.com/stipend-mcp/stipend/stripepay"
)

// TestClient_Requests: what Stipend sends Stripe for its objects: the
// payment's ID and the issuer in metadata, an idempotency key derived from
// the payment's key (the same on a retry, never the raw key), and a
// Checkout Session's mode, line item and client_reference_id.
func TestClient_Requests(t *testing.T) {
	srv, requests := stripemock.Recording(t, stripemock.URL(t))
	c, err := stripepay.New(stripepay.Config{SecretKey: stripemock.Key, URL: srv, Issuer: "https://stipend.test", MaxNetworkRetries: new(int64)})
	if err != nil {
		t.Fatal(err)
	}
	p := newPayment("order-77")
	p.Description = "100 searches"
	for range 2 { // a retry sends the same request
		if _, err := c.CreatePaymentIntent(t.Context(), &p, p.IdempotencyKey); err != nil {
			t.Fatalf("CreatePaymentIntent: %v", err)
		}
	}
	if _, err := c.CreateCheckoutSession(t.Context(), &p, stripepay.CheckoutRequest{SuccessURL: "https://app.example/ok", CustomerEmail: "a@example.com"}, p.IdempotencyKey); err != nil {
		t.Fatalf("CreateCheckoutSession: %v", err)
	}
	got := requests()
	if len(got) != 3 {
		t.Fatalf("%d requests, want 3", len(got))
	}
	pi, again, cs := got[0], got[1], got[2]
	if pi.Path != "/v1/payment_intents" || pi.Form.Get("amount") != "1500" || pi.Form.Get("currency") != "usd" ||
		pi.Form.Get("metadata[stipend_payment_id]") != p.ID || pi.Form.Get("metadata[stipend_issuer]") != "https://stipend.test" {
		t.Errorf("PaymentIntent request = %s %v, want amount, currency and metadata", pi.Path, pi.Form)
	}
	if !strings.HasPrefix(pi.IdempotencyKey, "stipend-pi-") || strings.Contains(pi.IdempotencyKey, "order-77") || again.IdempotencyKey != pi.IdempotencyKey {
		t.Errorf("idempotency keys %q then %q, want one derived key, the same on the retry, without the raw key", pi.IdempotencyKey, again.IdempotencyKey)
	}
	want := map[string]string{
		"mode": "payment", "client_reference_id": p.ID, "success_url": "https://app.example/ok", "customer_email": "a@example.com",
		"metadata[stipend_payment_id]": p.ID, "payment_intent_data[metadata][stipend_payment_id]": p.ID,
		"line_items[0][quantity]": "1", "line_items[0][price_data][unit_amount]": "1500",
		"line_items[0][price_data][currency]": "usd", "line_items[0][price_data][product_data][name]": "100 searches",
	}
	for k, v := range want {
		if got := cs.Form.Get(k); got != v {
			t.Errorf("Checkout Session %s = %q, want %q", k, got, v)
		}
	}
	if !strings.HasPrefix(cs.IdempotencyKey, "stipend-cs-") || cs.IdempotencyKey == pi.IdempotencyKey {
		t.Errorf("Checkout idempotency key %q, want its own derived key", cs.IdempotencyKey)
	}
	if p.ID != stripepay.PaymentID("order-77") {
		t.Errorf("payment ID %s, want the key's", p.ID)
	}
}
