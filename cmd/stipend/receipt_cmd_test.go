package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/receipt"
)

func TestReceiptVerifyCmd(t *testing.T) {
	dir := t.TempDir()
	keyFile, err := receipt.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := receipt.LoadKeyring(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	r := sampleReceipt(t)
	jws, err := k.Sign(r)
	if err != nil {
		t.Fatal(err)
	}
	jwksPath := writeReceiptJSON(t, dir, "jwks.json", k.JWKS())
	other, err := receipt.NewEphemeralKeyring()
	if err != nil {
		t.Fatal(err)
	}
	otherJWKS := writeReceiptJSON(t, dir, "other-jwks.json", other.JWKS())

	signed := receipt.Signed{Receipt: r, JWS: jws}
	tamperedObject := signed
	tamperedObject.Amount.Cents = 150000
	parts := strings.Split(jws, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	tamperedPayload := strings.Replace(string(payload), `"cents":1500`, `"cents":150000`, 1)
	tamperedJWS := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(tamperedPayload)) + "." + parts[2]

	// A forger signs with their own key under the real kid.
	_, forgerKey, _ := ed25519.GenerateKey(nil)
	forged := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(forgerKey, []byte(parts[0]+"."+parts[1])))

	// The same signature spelled another way: the lowest bit of its last
	// character lies past the signature's 64th byte.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	sig := parts[2]
	respelled := parts[0] + "." + parts[1] + "." + sig[:len(sig)-1] + string(alphabet[strings.IndexByte(alphabet, sig[len(sig)-1])^1])
	if a, b := decodeLenient(t, sig), decodeLenient(t, strings.Split(respelled, ".")[2]); !bytes.Equal(a, b) {
		t.Fatalf("respelled signature decodes to other bytes")
	}
	respelledObject := signed
	respelledObject.JWS = respelled

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/jwks.json" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(k.JWKS())
	}))
	defer srv.Close()

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"CompactJWS", []string{writeReceiptFile(t, dir, "r.jws", jws+"\n"), "--jwks", jwksPath}, 0, "VALID receipt rcpt-1", ""},
		{"FlagsFirst", []string{"--jwks", jwksPath, writeReceiptFile(t, dir, "r2.jws", jws)}, 0, "kid " + k.KeyID(), ""},
		{"APIObject", []string{writeReceiptJSON(t, dir, "signed.json", signed), "--jwks", jwksPath}, 0, "15.00 USD (1500 minor units)", ""},
		{"SucceedAnswer", []string{writeReceiptJSON(t, dir, "succeed.json", map[string]any{"payment": map[string]string{"id": "pay-1"}, "receipt": signed}), "--jwks", jwksPath}, 0, "pay-1", ""},
		{"JWKSURL", []string{writeReceiptFile(t, dir, "r3.jws", jws), "--jwks", srv.URL + "/.well-known/jwks.json"}, 0, "VALID", ""},
		{"JSONOutput", []string{writeReceiptFile(t, dir, "r4.jws", jws), "--jwks", jwksPath, "--json"}, 0, `"paymentId": "pay-1"`, ""},
		{"TamperedObjectField", []string{writeReceiptJSON(t, dir, "tampered-object.json", tamperedObject), "--jwks", jwksPath}, 1, "", `field "amount" does not match`},
		{"UnsignedObjectField", []string{writeReceiptJSON(t, dir, "extra.json", map[string]any{"jws": jws, "id": "rcpt-1", "bonus": 5}), "--jwks", jwksPath}, 1, "", `"bonus" is not in the signed receipt`},
		{"TamperedPayload", []string{writeReceiptFile(t, dir, "tampered.jws", tamperedJWS), "--jwks", jwksPath}, 1, "", "bad signature"},
		{"UnknownKid", []string{writeReceiptFile(t, dir, "r5.jws", jws), "--jwks", otherJWKS}, 1, "", "unknown kid"},
		{"WrongKey", []string{writeReceiptFile(t, dir, "forged.jws", forged), "--jwks", jwksPath}, 1, "", "bad signature"},
		{"SignatureRespelled", []string{writeReceiptFile(t, dir, "respelled.jws", respelled), "--jwks", jwksPath}, 1, "", "JWS signature: not canonical"},
		{"SignatureRespelledInObject", []string{writeReceiptJSON(t, dir, "respelled.json", respelledObject), "--jwks", jwksPath}, 1, "", "JWS signature: not canonical"},
		{"NotAReceipt", []string{writeReceiptFile(t, dir, "junk.txt", "hello"), "--jwks", jwksPath}, 1, "", "malformed"},
		{"ObjectWithoutJWS", []string{writeReceiptFile(t, dir, "nojws.json", `{"id":"rcpt-1"}`), "--jwks", jwksPath}, 1, "", `no "jws"`},
		{"JWKSNotFound", []string{writeReceiptFile(t, dir, "r6.jws", jws), "--jwks", srv.URL + "/missing"}, 1, "", "404"},
		{"FileURLRefused", []string{writeReceiptFile(t, dir, "r7.jws", jws), "--jwks", "file://" + jwksPath}, 1, "", "only http and https"},
		{"MissingJWKS", []string{writeReceiptFile(t, dir, "r8.jws", jws)}, 2, "", "--jwks is required"},
		{"NoReceipt", []string{"--jwks", jwksPath}, 2, "", "want one RECEIPT"},
		{"MissingReceiptFile", []string{filepath.Join(dir, "absent.jws"), "--jwks", jwksPath}, 1, "", "absent.jws"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := receiptVerifyCmd(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("receipt verify %q = exit %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

func decodeLenient(tb testing.TB, seg string) []byte {
	tb.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestReceiptVerifyCmd_Timeout: a JWKS URL that never answers fails within
// --timeout instead of hanging.
func TestReceiptVerifyCmd_Timeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	var stdout, stderr bytes.Buffer
	path := writeReceiptFile(t, t.TempDir(), "r.jws", "a.b.c")
	code := receiptVerifyCmd(context.Background(), []string{path, "--jwks", srv.URL, "--timeout", "50ms"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "deadline exceeded") {
		t.Errorf("receipt verify against a silent server = exit %d, stderr %q; want 1 and a deadline error", code, stderr.String())
	}
}

func sampleReceipt(tb testing.TB) receipt.Receipt {
	tb.Helper()
	amount, err := money.New(1500, "USD")
	if err != nil {
		tb.Fatal(err)
	}
	return receipt.Receipt{
		ID: "rcpt-1", Version: receipt.Version, Kind: receipt.KindPayment, Issuer: "stipend",
		AgentID: "agent-1", PaymentID: "pay-1", Amount: amount,
		Grants: []receipt.Grant{{EntitlementID: "ent-1", Type: entitlement.TypeCredits,
			Scope: entitlement.Scope{Service: "search"}, Balance: amount}},
		IssuedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
	}
}

func writeReceiptFile(tb testing.TB, dir, name, content string) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func writeReceiptJSON(tb testing.TB, dir, name string, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return writeReceiptFile(tb, dir, name, string(b))
}

// TestRunCommand_SigningKeyThenVerify goes through the stipend command line:
// make a key file, sign with it as serve would, verify with the CLI.
func TestRunCommand_SigningKeyThenVerify(t *testing.T) {
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "signing.json")
	var stdout, stderr bytes.Buffer
	if code := RunCommand(context.Background(), []string{"keys", "signing", "--out", keyPath}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("stipend keys signing = exit %d; stderr:\n%s", code, stderr.String())
	}
	k, err := receipt.LoadKeyFiles(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := k.Sign(sampleReceipt(t))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"receipt", "verify", writeReceiptFile(t, dir, "r.jws", jws), "--jwks", writeReceiptJSON(t, dir, "jwks.json", k.JWKS())}
	stdout.Reset()
	stderr.Reset()
	if code := RunCommand(context.Background(), args, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "VALID") {
		t.Errorf("stipend %q = exit %d, stdout %q, stderr %q; want 0 and VALID", args, code, stdout.String(), stderr.String())
	}
}

// TestReceiptVerifyCmd_NullGrants: an API object whose grants are null (a
// receipt without grants) matches a payload signed with "grants":[].
func TestReceiptVerifyCmd_NullGrants(t *testing.T) {
	k, err := receipt.NewEphemeralKeyring()
	if err != nil {
		t.Fatal(err)
	}
	r := sampleReceipt(t)
	r.Kind, r.Grants = receipt.KindRefund, nil
	jws, err := k.Sign(r)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	object := writeReceiptJSON(t, dir, "refund.json", receipt.Signed{Receipt: r, JWS: jws})
	var stdout, stderr bytes.Buffer
	if code := receiptVerifyCmd(context.Background(), []string{object, "--jwks", writeReceiptJSON(t, dir, "jwks.json", k.JWKS())}, &stdout, &stderr); code != 0 {
		t.Errorf("receipt verify (grants null) = exit %d, stderr %q; want 0", code, stderr.String())
	}
}

func TestMoneyText(t *testing.T) {
	for _, tt := range []struct {
		m    money.Money
		want string
	}{
		{money.Money{Cents: 300, Currency: "USD"}, "3.00 USD (300 minor units)"},
		{money.Money{Cents: 5, Currency: "EUR"}, "0.05 EUR (5 minor units)"},
		{money.Money{Cents: -1234, Currency: "USD"}, "-12.34 USD (-1234 minor units)"},
		{money.Money{Cents: 1500, Currency: "JPY"}, "1500 JPY"},
		{money.Money{Cents: 1500, Currency: "KWD"}, "1.500 KWD (1500 minor units)"},
		{money.Money{Cents: 7, Currency: "XQQ"}, "7 XQQ (minor units)"},
	} {
		if got := moneyText(tt.m); got != tt.want {
			t.Errorf("moneyText(%v) = %q, want %q", tt.m, got, tt.want)
		}
	}
}
