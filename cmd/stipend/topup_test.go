package main_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/internal/stripemock"
)

// TestMain_TopUp runs the real program on each durable store: a Checkout
// Session with saveForTopUp, whose payment_intent.succeeded saves the card;
// auto top-up enabled; a consume below the threshold, after which the
// instance's worker makes one off-session PaymentIntent at stripe-mock
// (answered succeeded) and grants its credits.
func TestMain_TopUp(t *testing.T) {
	stripeURL := stripemock.Patched(t, stripemock.URL(t), map[string]any{"status": "succeeded", "amount_received": 1000, "currency": "usd"})
	for _, tc := range durableStores {
		t.Run(tc.name, func(t *testing.T) {
			args, env := tc.args(t)
			m, admin, host := startStripeMain(t, args, env, stripeURL)
			agent := "agent-topup"
			status, body := callIdempotent(t, http.DefaultClient, "POST", m.URL()+"/v1/checkout-sessions", admin, "co-topup", map[string]any{
				"agentId": agent, "amount": map[string]any{"cents": 1000, "currency": "USD"}, "saveForTopUp": true,
				"grant": map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}}, "successUrl": "https://app.example/ok",
			})
			if status != http.StatusCreated {
				t.Fatalf("POST /v1/checkout-sessions: %d %v", status, body)
			}
			id := body["payment"].(map[string]any)["id"].(string)
			paid := stripeEventJSON("evt_pi_topup_"+tc.name, "payment_intent.succeeded", map[string]any{
				"id": "pi_checkout_" + tc.name, "object": "payment_intent", "status": "succeeded", "amount": 1000, "amount_received": 1000,
				"currency": "usd", "setup_future_usage": "off_session", "customer": "cus_topup", "payment_method": "pm_topup",
				"metadata": map[string]any{"stipend_payment_id": id, "stipend_issuer": "stipend"},
			})
			if got := deliverStripe(t, m, paid); got != http.StatusOK {
				t.Fatalf("payment_intent.succeeded: %d, want 200", got)
			}
			path := m.URL() + "/v1/accounts/" + agent + "/topup"
			status, body = call(t, http.DefaultClient, "PUT", path, admin, map[string]any{
				"threshold": map[string]any{"cents": 500, "currency": "USD"}, "amount": map[string]any{"cents": 1000, "currency": "USD"},
				"dailyCap": map[string]any{"cents": 5000, "currency": "USD"}, "scope": map[string]any{"service": "search"},
			})
			if status != http.StatusOK || body["enabled"] != true || body["method"].(map[string]any)["customer"] != "cus_topup" {
				t.Fatalf("PUT topup: %d %v; want enabled with the checkout's customer", status, body)
			}
			status, body = call(t, http.DefaultClient, "POST", m.URL()+"/v1/consume", host, map[string]any{
				"agentId": agent, "service": "search", "tool": "web", "idempotencyKey": "call-1",
				"cost": map[string]any{"cents": 600, "currency": "USD"},
			})
			if status != http.StatusOK {
				t.Fatalf("consume: %d %v", status, body)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, body = call(t, http.DefaultClient, "GET", path, admin, nil)
				if body["sequence"] == float64(1) && body["pendingPaymentId"] == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("top-up after 30 s: %v; logs:\n%s", body, m.stderr)
				}
				time.Sleep(20 * time.Millisecond) // the worker runs in the background; nothing else to wait on
			}
			status, body = call(t, http.DefaultClient, "GET", m.URL()+"/v1/accounts/"+agent+"/entitlements?status=active", admin, nil)
			var sum float64
			for _, it := range body["items"].([]any) {
				sum += it.(map[string]any)["credits"].(map[string]any)["balance"].(map[string]any)["cents"].(float64)
			}
			if status != http.StatusOK || sum != 1400 {
				t.Errorf("credits after the top-up: %v (%d), want 1400 (400 left + 1000)", sum, status)
			}
		})
	}
}
