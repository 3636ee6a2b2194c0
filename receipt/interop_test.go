package receipt_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/stipend-mcp/stipend/receipt"
)

// TestInterop_JWX verifies receipts with an independent JOSE library
// (lestrrat-go/jwx), fetching the JWKS over HTTP as a client would.
func TestInterop_JWX(t *testing.T) {
	oldFile := generateKey(t)
	old := newKeyring(t, oldFile)
	k := newKeyring(t, generateKey(t), publicOnly(t, oldFile)) // rotated: new signs, old verifies

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/jwks.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(k.JWKS()); err != nil {
			t.Errorf("encode JWKS: %v", err)
		}
	}))
	defer srv.Close()

	set, err := jwk.Fetch(context.Background(), srv.URL+"/.well-known/jwks.json")
	if err != nil {
		t.Fatalf("jwk.Fetch: %v", err)
	}
	if got := set.Len(); got != 2 {
		t.Fatalf("jwx read %d keys from the JWKS, want 2", got)
	}

	r := sampleReceipt(t)
	newJWS, err := k.Sign(r)
	if err != nil {
		t.Fatal(err)
	}
	oldJWS, err := old.Sign(r)
	if err != nil {
		t.Fatal(err)
	}
	want, err := receipt.Canonical(r)
	if err != nil {
		t.Fatal(err)
	}
	for name, compact := range map[string]string{"NewKey": newJWS, "RetiredKey": oldJWS} {
		t.Run(name, func(t *testing.T) {
			got, err := jws.Verify([]byte(compact), jws.WithKeySet(set, jws.WithRequireKid(true)))
			if err != nil {
				t.Fatalf("jwx jws.Verify: %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("jwx payload = %s, want %s", got, want)
			}
			msg, err := jws.Parse([]byte(compact))
			if err != nil {
				t.Fatal(err)
			}
			h := msg.Signatures()[0].ProtectedHeaders()
			if typ, _ := h.Type(); typ != receipt.Type {
				t.Errorf("jwx typ = %q, want %q", typ, receipt.Type)
			}
			if alg, _ := h.Algorithm(); alg.String() != "EdDSA" {
				t.Errorf("jwx alg = %q, want EdDSA", alg)
			}
		})
	}

	t.Run("Tampered", func(t *testing.T) {
		parts := strings.Split(newJWS, ".")
		payload := strings.Replace(string(decodeSegment(t, parts[1])), `"cents":1500`, `"cents":1501`, 1)
		if _, err := jws.Verify([]byte(withPayload(parts, payload)), jws.WithKeySet(set, jws.WithRequireKid(true))); err == nil {
			t.Error("jwx verified a tampered receipt")
		}
	})
	t.Run("UnknownKid", func(t *testing.T) {
		other, err := newKeyring(t).Sign(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jws.Verify([]byte(other), jws.WithKeySet(set, jws.WithRequireKid(true))); err == nil {
			t.Error("jwx verified a receipt signed by a key not in the JWKS")
		}
	})
}

// TestInterop_GoJoseAlone runs the go-jose snippet of docs/receipts.md on
// the documented example.
func TestInterop_GoJoseAlone(t *testing.T) {
	compact := strings.TrimSpace(string(readFile(t, "testdata/example/receipt.jws")))
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(readFile(t, "testdata/example/jwks.json"), &set); err != nil {
		t.Fatal(err)
	}
	obj, err := jose.ParseSignedCompact(compact, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		t.Fatal(err)
	}
	h := obj.Signatures[0].Protected
	if got := h.ExtraHeaders[jose.HeaderType]; got != receipt.Type {
		t.Errorf("typ = %v, want %s", got, receipt.Type)
	}
	keys := set.Key(h.KeyID)
	if len(keys) != 1 {
		t.Fatalf("set.Key(%q) = %d keys, want 1", h.KeyID, len(keys))
	}
	payload, err := obj.Verify(keys[0])
	if err != nil {
		t.Fatalf("go-jose Verify: %v", err)
	}
	if !strings.HasPrefix(string(payload), `{"agentId":"agent-1",`) {
		t.Errorf("payload = %s, want the example receipt", payload)
	}
}
