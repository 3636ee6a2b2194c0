package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/internal/stripemock"
)

const eventsSecret = "whsec_cmd_stripe_events"

// deliverStripe signs payload as Stripe does and posts it to m's Stripe route.
func deliverStripe(t *testing.T, m *runningMain, payload string) int {
	t.Helper()
	signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: []byte(payload), Secret: eventsSecret})
	req, err := http.NewRequest("POST", m.URL()+"/v1/webhooks/stripe", bytes.NewReader(signed.Payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", signed.Header)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// durableStores are the stores the Stripe tests run the real program on:
// the flags and environment each needs.
var durableStores = []struct {
	name string
	args func(t *testing.T) ([]string, map[string]string)
}{
	{"Firestore", func(t *testing.T) ([]string, map[string]string) {
		return []string{"--store", "firestore", "--firestore-project", emulator.ProjectID, "--collection-prefix", emulator.Prefix(t)},
			map[string]string{"FIRESTORE_EMULATOR_HOST": emulator.Host(t)}
	}},
	{"Postgres", func(t *testing.T) ([]string, map[string]string) {
		return []string{"--store", "postgres", "--postgres-url", pgtest.SchemaURL(t)}, map[string]string{}
	}},
}

// startStripeMain runs the real program in production on a store (args,
// env) with Stripe at stripeURL: events signed with eventsSecret, no
// webhook delivery or Stripe sweep in the background. It answers once
// ready, with its admin and host keys.
func startStripeMain(t *testing.T, args []string, env map[string]string, stripeURL string) (m *runningMain, admin, host string) {
	t.Helper()
	apiKeys, signingKey, admin, host := writeKeyFiles(t, t.TempDir())
	env["STIPEND_STRIPE_SECRET_KEY"] = stripemock.Key
	m = startMainEnv(t, env, append(args, "--env", "production", "--api-keys-file", apiKeys, "--signing-key-file", signingKey,
		"--stripe-api-url", stripeURL, "--stripe-webhook-secret", eventsSecret, "--webhook-concurrency", "0", "--stripe-sweep-interval", "0")...)
	waitReady(t, m)
	return m, admin, host
}

func stripeEventJSON(id, typ string, object map[string]any) string {
	b, _ := json.Marshal(map[string]any{"id": id, "object": "event", "type": typ, "data": map[string]any{"object": object}})
	return string(b)
}

// TestMain_StripeCheckoutEvents runs the real program on each durable
// store: a Checkout Session made at stripe-mock, its completion event
// (delivered twice), a partial refund and a dispute, each answered and
// applied once.
func TestMain_StripeCheckoutEvents(t *testing.T) {
	mock := stripemock.URL(t)
	for _, tc := range durableStores {
		t.Run(tc.name, func(t *testing.T) {
			args, env := tc.args(t)
			m, admin, _ := startStripeMain(t, args, env, mock)
			status, body := callIdempotent(t, http.DefaultClient, "POST", m.URL()+"/v1/checkout-sessions", admin, "co-"+tc.name, map[string]any{
				"agentId": "agent-co", "amount": map[string]any{"cents": 1500, "currency": "USD"},
				"grant": map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}}, "successUrl": "https://app.example/ok",
			})
			if status != http.StatusCreated {
				t.Fatalf("POST /v1/checkout-sessions: %d %v", status, body)
			}
			pay := body["payment"].(map[string]any)
			id, session := pay["id"].(string), body["sessionId"].(string)
			meta := map[string]any{"stipend_payment_id": id, "stipend_issuer": "stipend"}
			completed := stripeEventJSON("evt_co_"+tc.name, "checkout.session.completed", map[string]any{
				"id": session, "object": "checkout.session", "status": "complete", "payment_status": "paid",
				"amount_total": 1500, "currency": "usd", "metadata": meta, "payment_intent": "pi_co_" + tc.name,
			})
			for i := range 2 {
				if got := deliverStripe(t, m, completed); got != http.StatusOK {
					t.Fatalf("checkout.session.completed (delivery %d): %d, want 200", i+1, got)
				}
			}
			status, body = call(t, http.DefaultClient, "GET", m.URL()+"/v1/payments?providerIntentId=pi_co_"+tc.name, admin, nil)
			items, _ := body["items"].([]any)
			if status != http.StatusOK || len(items) != 1 || items[0].(map[string]any)["status"] != "succeeded" {
				t.Fatalf("payment by intent after the completion: %d %v, want it succeeded", status, body)
			}
			ent := items[0].(map[string]any)["entitlementIds"].([]any)[0].(string)
			refund := stripeEventJSON("evt_rf_"+tc.name, "charge.refunded", map[string]any{
				"id": "ch_" + tc.name, "object": "charge", "amount": 1500, "amount_refunded": 400, "currency": "usd",
				"refunded": false, "payment_intent": "pi_co_" + tc.name,
			})
			if got := deliverStripe(t, m, refund); got != http.StatusOK {
				t.Fatalf("charge.refunded (partial): %d, want 200", got)
			}
			_, e := call(t, http.DefaultClient, "GET", m.URL()+"/v1/entitlements/"+ent, admin, nil)
			if bal := e["credits"].(map[string]any)["balance"].(map[string]any)["cents"]; bal != float64(1100) {
				t.Errorf("balance after refunding 400 of 1500: %v, want 1100", bal)
			}
			dispute := stripeEventJSON("evt_dp_"+tc.name, "charge.dispute.created", map[string]any{
				"id": "dp_" + tc.name, "object": "dispute", "charge": "ch_" + tc.name, "payment_intent": "pi_co_" + tc.name, "reason": "fraudulent",
			})
			if got := deliverStripe(t, m, dispute); got != http.StatusOK {
				t.Fatalf("charge.dispute.created: %d, want 200", got)
			}
			_, e = call(t, http.DefaultClient, "GET", m.URL()+"/v1/entitlements/"+ent, admin, nil)
			_, p := call(t, http.DefaultClient, "GET", m.URL()+"/v1/payments/"+id, admin, nil)
			if e["status"] != "revoked" || p["disputeReason"] != fmt.Sprintf("stripe: dispute dp_%s opened (fraudulent)", tc.name) {
				t.Errorf("after the dispute: entitlement %v, payment disputeReason %v; want revoked, the reason", e["status"], p["disputeReason"])
			}
			_, r := call(t, http.DefaultClient, "GET", m.URL()+"/v1/accounts/agent-co/receipts", admin, nil)
			if rs, _ := r["items"].([]any); len(rs) != 2 {
				t.Errorf("receipts: %d, want 2 (the payment's and the partial refund's)", len(rs))
			}
		})
	}
}
