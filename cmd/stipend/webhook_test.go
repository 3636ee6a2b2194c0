package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
)

// TestMain_WebhookDelivered checks the wiring of the webhook routes and the
// background dispatcher: a payment completed through the API reaches an
// endpoint registered through the API, signed.
func TestMain_WebhookDelivered(t *testing.T) {
	type delivery struct {
		id, signature string
		body          map[string]any
	}
	got := make(chan delivery, 8)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		got <- delivery{id: r.Header.Get("webhook-id"), signature: r.Header.Get("webhook-signature"), body: body}
	}))
	t.Cleanup(receiver.Close)

	keysFile := filepath.Join(t.TempDir(), "dev-keys.json")
	m := startMain(t, "--dev-keys-out", keysFile, "--webhook-allow-private")
	keys := readDevKeys(t, keysFile)

	status, ep := callIdempotent(t, http.DefaultClient, "POST", m.URL()+"/v1/webhook-endpoints", keys.Admin, "endpoint-1", map[string]any{
		"url": receiver.URL + "/hook", "eventTypes": []string{"payment.succeeded"},
	})
	if status != http.StatusCreated || ep["secret"] == nil {
		t.Fatalf("create endpoint: status %d, body %v; want 201 with a secret", status, ep)
	}

	status, pay := callIdempotent(t, http.DefaultClient, "POST", m.URL()+"/v1/payments", keys.Billing, "pay-1", map[string]any{
		"agentId": "agent-demo", "amount": map[string]any{"cents": 500, "currency": "USD"}, "provider": "manual",
		"grant": map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}},
	})
	if status != http.StatusCreated {
		t.Fatalf("create payment: status %d, body %v; want 201", status, pay)
	}
	status, done := call(t, http.DefaultClient, "POST", m.URL()+"/v1/payments/"+pay["id"].(string)+"/succeed", keys.Billing, map[string]any{})
	if status != http.StatusOK {
		t.Fatalf("succeed payment: status %d, body %v; want 200", status, done)
	}

	d := <-got
	if d.id == "" || d.signature == "" {
		t.Errorf("delivery headers: webhook-id %q, webhook-signature %q; want both set", d.id, d.signature)
	}
	if d.body["type"] != "payment.succeeded" {
		t.Errorf("delivery body type = %v, want payment.succeeded (body %v)", d.body["type"], d.body)
	}
}
