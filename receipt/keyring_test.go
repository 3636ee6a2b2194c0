package receipt_test

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/receipt"
)

// The RFC 8037 Appendix A.1 key and its A.3 RFC 7638 thumbprint.
const (
	rfc8037D   = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
	rfc8037X   = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	rfc8037Kid = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
)

func TestKeyring_RFC8037Key(t *testing.T) {
	k := newKeyring(t, []byte(`{"kty":"OKP","crv":"Ed25519","d":"`+rfc8037D+`","x":"`+rfc8037X+`"}`))
	if got, want := k.KeyID(), rfc8037Kid; got != want {
		t.Errorf("KeyID() = %q, want the RFC 8037 A.3 thumbprint %q", got, want)
	}
	want := receipt.JWKS{Keys: []receipt.JWK{{KeyType: "OKP", Curve: "Ed25519", X: rfc8037X, KeyID: rfc8037Kid, Algorithm: "EdDSA", Use: "sig"}}}
	if diff := cmp.Diff(want, k.JWKS()); diff != "" {
		t.Errorf("JWKS() mismatch (-want +got):\n%s", diff)
	}
}

func TestGenerateKey(t *testing.T) {
	file := generateKey(t)
	var jwk jose.JSONWebKey // an independent reading of the file
	if err := jwk.UnmarshalJSON(file); err != nil {
		t.Fatalf("go-jose cannot read the key file: %v\n%s", err, file)
	}
	if jwk.IsPublic() || jwk.Algorithm != "EdDSA" || jwk.Use != "sig" {
		t.Errorf("key file = %s, want a private EdDSA signing key", file)
	}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	k := newKeyring(t, file)
	if got, want := k.KeyID(), base64.RawURLEncoding.EncodeToString(tp); got != want || jwk.KeyID != want {
		t.Errorf("KeyID() = %q, file kid %q; want the go-jose thumbprint %q", got, jwk.KeyID, want)
	}
	if other := newKeyring(t); other.KeyID() == k.KeyID() {
		t.Errorf("two generated keys share kid %s", k.KeyID())
	}
}

func TestKeyring_JWKSHasNoPrivateParts(t *testing.T) {
	old := generateKey(t)
	k := newKeyring(t, generateKey(t), old)
	b, err := json.Marshal(k.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"d"`) {
		t.Errorf("JWKS JSON %s contains a private key", b)
	}
	if got := len(k.JWKS().Keys); got != 2 {
		t.Fatalf("JWKS() has %d keys, want 2", got)
	}
	if got, want := k.JWKS().Keys[0].KeyID, k.KeyID(); got != want {
		t.Errorf("JWKS().Keys[0].KeyID = %q, want the signing key %q first", got, want)
	}
	set, err := receipt.ParseJWKS(b)
	if err != nil {
		t.Fatalf("ParseJWKS(JWKS JSON): %v", err)
	}
	if diff := cmp.Diff(k.JWKS(), set); diff != "" {
		t.Errorf("ParseJWKS round trip (-want +got):\n%s", diff)
	}
}

func TestLoadKeyring_Errors(t *testing.T) {
	good := generateKey(t)
	public := publicOnly(t, good)
	other := generateKey(t)
	tests := []struct {
		name    string
		files   [][]byte
		wantErr error  // nil: any error
		wantMsg string // a part of the message
	}{
		{"NoFiles", nil, nil, "no signing key"},
		{"NotJSON", [][]byte{[]byte("-----BEGIN PRIVATE KEY-----")}, receipt.ErrMalformed, "key 1"},
		{"FirstIsPublicOnly", [][]byte{public}, nil, `must hold the private key "d"`},
		{"WrongKeyType", [][]byte{[]byte(`{"kty":"EC","crv":"P-256","x":"` + rfc8037X + `","d":"` + rfc8037D + `"}`)}, receipt.ErrWrongAlgorithm, "kty"},
		{"WrongAlg", [][]byte{[]byte(`{"kty":"OKP","crv":"Ed25519","alg":"ES256","x":"` + rfc8037X + `","d":"` + rfc8037D + `"}`)}, receipt.ErrWrongAlgorithm, "ES256"},
		{"KidIsNotThumbprint", [][]byte{[]byte(`{"kty":"OKP","crv":"Ed25519","kid":"mine","x":"` + rfc8037X + `","d":"` + rfc8037D + `"}`)}, receipt.ErrMalformed, "thumbprint"},
		{"XIsNotPublicKeyOfD", [][]byte{swapX(t, good, other)}, receipt.ErrMalformed, "x is not the public key of d"},
		{"ShortSeed", [][]byte{[]byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","d":"AAAA"}`)}, receipt.ErrMalformed, "seed"},
		{"SeedPaddingBits", [][]byte{[]byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","d":"` + setUnusedBit(t, rfc8037D) + `"}`)}, receipt.ErrMalformed, "seed"},
		{"XPaddingBits", [][]byte{[]byte(`{"kty":"OKP","crv":"Ed25519","x":"` + setUnusedBit(t, rfc8037X) + `","d":"` + rfc8037D + `"}`)}, receipt.ErrMalformed, "x must be"},
		{"UnknownMember", [][]byte{[]byte(`{"kty":"OKP","crv":"Ed25519","x":"` + rfc8037X + `","d":"` + rfc8037D + `","extra":1}`)}, receipt.ErrMalformed, "extra"},
		{"SameKeyTwice", [][]byte{good, public}, nil, "given twice"},
		{"SecondFileBad", [][]byte{good, []byte("{}")}, nil, "key 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := receipt.LoadKeyring(tt.files...)
			if err == nil {
				t.Fatalf("LoadKeyring = keyring %s, want an error", k.KeyID())
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("LoadKeyring error %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("LoadKeyring error %q, want it to say %q", err, tt.wantMsg)
			}
		})
	}
}

func TestLoadKeyFiles(t *testing.T) {
	dir := t.TempDir()
	newPath, oldPath := filepath.Join(dir, "new.json"), filepath.Join(dir, "old.json")
	newFile, oldFile := generateKey(t), generateKey(t)
	writeFile(t, newPath, newFile)
	writeFile(t, oldPath, publicOnly(t, oldFile))

	k, err := receipt.LoadKeyFiles(newPath, oldPath)
	if err != nil {
		t.Fatalf("LoadKeyFiles: %v", err)
	}
	if got, want := k.KeyID(), newKeyring(t, newFile).KeyID(); got != want {
		t.Errorf("KeyID() = %q, want the first file's %q", got, want)
	}
	if got := len(k.JWKS().Keys); got != 2 {
		t.Errorf("JWKS() has %d keys, want 2", got)
	}

	missing := filepath.Join(dir, "missing.json")
	if _, err := receipt.LoadKeyFiles(newPath, missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("LoadKeyFiles(missing) error %v, want one naming %s", err, missing)
	}
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, bad, []byte("{}"))
	if _, err := receipt.LoadKeyFiles(newPath, bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("LoadKeyFiles(bad) error %v, want one naming %s", err, bad)
	}
}

func TestNewEphemeralKeyring(t *testing.T) {
	k, err := receipt.NewEphemeralKeyring()
	if err != nil {
		t.Fatal(err)
	}
	jws, err := k.Sign(sampleReceipt(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Verify(jws); err != nil {
		t.Errorf("Verify(own receipt): %v", err)
	}
}

// publicOnly returns the key file without its private part "d".
func publicOnly(tb testing.TB, file []byte) []byte {
	tb.Helper()
	m := decodeObject(tb, file)
	delete(m, "d")
	return encodeObject(tb, m)
}

// swapX returns key file a with the public key x of key file b.
func swapX(tb testing.TB, a, b []byte) []byte {
	tb.Helper()
	m := decodeObject(tb, a)
	m["x"] = decodeObject(tb, b)["x"]
	delete(m, "kid")
	return encodeObject(tb, m)
}

func decodeObject(tb testing.TB, b []byte) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

func encodeObject(tb testing.TB, m map[string]any) []byte {
	tb.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func writeFile(tb testing.TB, path string, b []byte) {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
}
