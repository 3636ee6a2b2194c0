package main_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/internal/stripemock"
)

// TestMain_StripeReconcile runs the real program in production on
// PostgreSQL with a Stripe key file: a stripe payment made without an
// intent gets its PaymentIntent from Stripe (stripe-mock); its success
// event is lost, and `stipend stripe reconcile` reads the intent, now
// succeeded, and completes the payment once. The key is never logged.
func TestMain_StripeReconcile(t *testing.T) {
	mock := stripemock.URL(t)
	url := pgtest.SchemaURL(t)
	dir := t.TempDir()
	apiKeys, signingKey, admin, _ := writeKeyFiles(t, dir)
	keyFile := filepath.Join(dir, "stripe-key")
	if err := os.WriteFile(keyFile, []byte(stripemock.Key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Stripe as it is after the payer paid: stripe-mock's intent, succeeded.
	stripeURL := stripemock.Patched(t, mock, map[string]any{"status": "succeeded", "amount_received": 1500, "currency": "usd"})
	env := map[string]string{
		"STIPEND_STORE": "postgres", "STIPEND_POSTGRES_URL": url, "STIPEND_SIGNING_KEY_FILE": signingKey,
		"STIPEND_STRIPE_SECRET_KEY_FILE": keyFile, "STIPEND_STRIPE_API_URL": stripeURL,
	}
	m := startMainEnv(t, env, "--env", "production", "--api-keys-file", apiKeys, "--webhook-concurrency", "0", "--stripe-sweep-interval", "0")
	waitReady(t, m)
	status, body := callIdempotent(t, http.DefaultClient, "POST", m.URL()+"/v1/payments", admin, "order-1", map[string]any{
		"agentId": "agent-demo", "amount": map[string]any{"cents": 1500, "currency": "USD"}, "provider": "stripe",
		"grant": map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}},
	})
	if status != http.StatusCreated || body["clientSecret"] == "" || body["providerIntentId"] == "" {
		t.Fatalf("POST /v1/payments (stripe, no intent): %d %v; want 201 with the intent and its client secret", status, body)
	}
	id := body["id"].(string)

	code, stdout, stderr := runCommand(t, env, "stripe", "reconcile", "--age", "1ns")
	if code != 0 || !strings.Contains(stdout, "checked 1, applied 1, failed 0") {
		t.Fatalf("stipend stripe reconcile = %d\n%s%s\nwant the payment applied", code, stdout, stderr)
	}
	status, body = call(t, http.DefaultClient, "GET", m.URL()+"/v1/payments/"+id, admin, nil)
	if status != http.StatusOK || body["status"] != "succeeded" || body["receiptId"] == nil {
		t.Errorf("payment after reconcile: %d %v; want succeeded with a receipt", status, body)
	}
	code, stdout, _ = runCommand(t, env, "stripe", "reconcile", "--age", "1ns")
	if code != 0 || !strings.Contains(stdout, "checked 0, applied 0, failed 0") {
		t.Errorf("second reconcile = %d %s, want nothing left pending", code, stdout)
	}
	for name, logs := range map[string]string{"serve": m.stderr.String(), "reconcile": stderr} {
		if strings.Contains(logs, stripemock.Key) {
			t.Errorf("%s logged the Stripe secret key", name)
		}
	}
}

func TestStripeCmd_Refusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"MemoryStore", nil, []string{"stripe", "reconcile"}, "memory store"},
		{"NoSigningKey", map[string]string{"STIPEND_STORE": "postgres", "STIPEND_POSTGRES_URL": "postgres://x@127.0.0.1:1/x"}, []string{"stripe", "reconcile"}, "--signing-key-file"},
		{"BadAge", map[string]string{"STIPEND_STORE": "postgres"}, []string{"stripe", "reconcile", "--age", "0s", "--signing-key-file", "k"}, "--age"},
		{"UnknownSubcommand", nil, []string{"stripe", "sweep"}, "stripe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCommand(t, tc.env, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("stipend %v = %d, stderr %q; want 2 naming %q", tc.args, code, stderr, tc.want)
			}
		})
	}
}

// TestMain_StripeSweep: serve's own sweep, on the memory store, completes
// a stripe payment whose success event never arrived.
func TestMain_StripeSweep(t *testing.T) {
	stripeURL := stripemock.Patched(t, stripemock.URL(t), map[string]any{"status": "succeeded", "amount_received": 700, "currency": "usd"})
	env := map[string]string{"STIPEND_STRIPE_SECRET_KEY": stripemock.Key, "STIPEND_STRIPE_API_URL": stripeURL}
	keysOut := filepath.Join(t.TempDir(), "keys.json")
	m := startMainEnv(t, env, "--dev-keys-out", keysOut, "--webhook-concurrency", "0",
		"--stripe-sweep-interval", "20ms", "--stripe-sweep-age", "1ns")
	billing := readDevKeys(t, keysOut).Billing
	status, body := callIdempotent(t, http.DefaultClient, "POST", m.URL()+"/v1/payments", billing, "order-2", map[string]any{
		"agentId": "agent-demo", "amount": map[string]any{"cents": 700, "currency": "USD"}, "provider": "stripe",
		"grant": map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}},
	})
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/payments: %d %v, want 201", status, body)
	}
	id := body["id"].(string)
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body = call(t, http.DefaultClient, "GET", m.URL()+"/v1/payments/"+id, billing, nil)
		// The sweep logs once the payment's change returned: a moment
		// after the change is visible.
		if status == http.StatusOK && body["status"] == "succeeded" && strings.Contains(m.stderr.String(), "payment reconciled from Stripe") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("payment %v (want succeeded, and the sweep's log line) after 30 s of sweeps every 20 ms; logs:\n%s", body["status"], m.stderr)
		}
		time.Sleep(20 * time.Millisecond) // the sweep's own interval: nothing to wait on but its next tick
	}
}
