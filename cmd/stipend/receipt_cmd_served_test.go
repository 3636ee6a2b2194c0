package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store/memory"
)

// TestServedReceipts_IndependentVerification runs the API on the memory store
// with a rotated keyring, completes and refunds a payment over HTTP, and
// verifies the receipts it serves against the JWKS it serves, with an
// independent JOSE library (lestrrat-go/jwx) and with `stipend receipt verify`.
func TestServedReceipts_IndependentVerification(t *testing.T) {
	oldFile, err := receipt.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	newFile, err := receipt.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	keyring, err := receipt.LoadKeyring(newFile, oldFile)
	if err != nil {
		t.Fatal(err)
	}
	raw, key, err := apikey.Generate("billing", apikey.RoleBilling, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := apikey.NewSet([]apikey.Key{key})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Store: memory.New(), Keys: keys, Signer: keyring, Issuer: "https://stipend.test"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	call := func(method, path, idemKey, body string, wantStatus int) []byte {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+raw)
		req.Header.Set("Content-Type", "application/json")
		if idemKey != "" {
			req.Header.Set(api.HeaderIdempotencyKey, idemKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, wantStatus)
		}
		return b
	}

	// An amount past the ceiling is refused before anything is stored or signed.
	over := call("POST", "/v1/payments", "too-much", `{"agentId":"agent-1","amount":{"cents":9007199254740992,"currency":"USD"},"provider":"manual","grant":{"type":"credits","scope":{"service":"search"}}}`, http.StatusBadRequest)
	if !strings.Contains(string(over), "amount.cents") {
		t.Errorf("400 for an amount past the ceiling = %s, want it to name amount.cents", over)
	}

	var p struct{ ID string }
	mustUnmarshal(t, call("POST", "/v1/payments", "pay-key-1", `{"agentId":"agent-1","amount":{"cents":1500,"currency":"USD"},"provider":"manual","grant":{"type":"credits","scope":{"service":"search"}}}`, http.StatusCreated), &p)
	succeed := call("POST", "/v1/payments/"+p.ID+"/succeed", "", "{}", http.StatusOK)
	refund := call("POST", "/v1/payments/"+p.ID+"/refund", "", "{}", http.StatusOK)
	var sAnswer, rAnswer struct{ Receipt receipt.Signed }
	mustUnmarshal(t, succeed, &sAnswer)
	mustUnmarshal(t, refund, &rAnswer)
	fetched := call("GET", "/v1/receipts/"+sAnswer.Receipt.ID, "", "", http.StatusOK)

	set, err := jwk.Fetch(context.Background(), ts.URL+"/.well-known/jwks.json")
	if err != nil {
		t.Fatalf("jwk.Fetch(served JWKS): %v", err)
	}
	if got := set.Len(); got != 2 {
		t.Errorf("served JWKS has %d keys, want 2 (signing and retired)", got)
	}
	for _, r := range []receipt.Signed{sAnswer.Receipt, rAnswer.Receipt} {
		payload, err := jws.Verify([]byte(r.JWS), jws.WithKeySet(set, jws.WithRequireKid(true)))
		if err != nil {
			t.Fatalf("jwx verify of served %s receipt: %v", r.Kind, err)
		}
		want, err := receipt.Canonical(r.Receipt)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(payload, want) {
			t.Errorf("jwx payload = %s, want the served receipt %s", payload, want)
		}
	}

	dir := t.TempDir()
	for name, file := range map[string][]byte{"succeed.json": succeed, "refund.json": refund, "get.json": fetched} {
		var stdout, stderr bytes.Buffer
		args := []string{writeReceiptFile(t, dir, name, string(file)), "--jwks", ts.URL + "/.well-known/jwks.json"}
		if code := receiptVerifyCmd(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Errorf("receipt verify %s = exit %d, stderr %s", name, code, stderr.String())
		}
	}
	tampered := bytes.Replace(fetched, []byte(`"cents":1500`), []byte(`"cents":1501`), 1)
	var stdout, stderr bytes.Buffer
	args := []string{writeReceiptFile(t, dir, "tampered.json", string(tampered)), "--jwks", ts.URL + "/.well-known/jwks.json"}
	if code := receiptVerifyCmd(context.Background(), args, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "does not match") {
		t.Errorf("receipt verify of a tampered served receipt = exit %d, stderr %q; want 1 and a field mismatch", code, stderr.String())
	}
}

func mustUnmarshal(tb testing.TB, b []byte, v any) {
	tb.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		tb.Fatalf("decode %s: %v", b, err)
	}
}
