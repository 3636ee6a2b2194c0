package main_test

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/client"
	main "github.com/stipend-mcp/stipend/cmd/stipend"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// TestServe_LedgerRoutesRequireKey serves on the memory store in
// development: a grant needs a key, is replayed, and conflicts when reused.
func TestServe_LedgerRoutesRequireKey(t *testing.T) {
	dir := t.TempDir()
	m := main.NewMain()
	m.Stdout, m.Stderr = &bytes.Buffer{}, &bytes.Buffer{}
	if err := m.ParseFlags([]string{"--addr", "127.0.0.1:0", "--webhook-concurrency", "0", "--dev-keys-out", filepath.Join(dir, "keys.json")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	s := &crashServer{url: m.URL(), keys: *m.DevKeys}
	path := "/v1/accounts/" + main.DevAgent + "/entitlements"
	grant := `{"type":"credits","scope":{"service":"search"},"balance":{"cents":5,"currency":"USD"}}`

	missing := s.must(t, http.StatusBadRequest, "POST", path, "", grant)
	if !strings.Contains(string(missing.body), "idempotency-key-missing") {
		t.Errorf("grant without a key: body %s, want the idempotency-key-missing problem", missing.body)
	}
	first := s.must(t, http.StatusCreated, "POST", path, "g-1", grant)
	again := s.must(t, http.StatusCreated, "POST", path, "g-1", grant)
	if again.header.Get(idempotency.HeaderReplayed) != "true" || !bytes.Equal(again.body, first.body) {
		t.Errorf("retry: replayed %q, body %s; want the first answer replayed", again.header.Get(idempotency.HeaderReplayed), again.body)
	}
	s.must(t, http.StatusUnprocessableEntity, "POST", path, "g-1", strings.Replace(grant, `"cents":5`, `"cents":6`, 1))
	if n := s.countEntitlements(t, main.DevAgent); n != 1 {
		t.Errorf("entitlements = %d, want 1", n)
	}
	s.must(t, http.StatusOK, "GET", "/readyz", "", "")

	// The Go client sends a key on the key-requiring routes it calls.
	ctx := context.Background()
	billing, err := client.New(m.URL(), m.DevKeys.Billing)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := billing.CreatePayment(ctx, "pay-1", client.PaymentRequest{AgentID: main.DevAgent,
		Amount: money.Money{Cents: 300, Currency: "USD"}, Provider: payment.ProviderManual,
		Grant: payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}}})
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	if _, err := billing.SucceedPayment(ctx, p.ID); err != nil {
		t.Fatalf("SucceedPayment: %v", err)
	}
	if _, err := billing.RefundPayment(ctx, p.ID); err != nil {
		t.Errorf("client RefundPayment through the ledger: %v", err)
	}
}
