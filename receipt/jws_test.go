package receipt_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/receipt"
)

func TestSignVerify(t *testing.T) {
	k := newKeyring(t)
	want := sampleReceipt(t)
	jws, err := k.Sign(want)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	got, err := receipt.Verify(jws, k.JWKS())
	if err != nil {
		t.Fatalf("Verify(Sign(r)): %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Verify(Sign(r)) mismatch (-want +got):\n%s", diff)
	}

	h, err := receipt.ParseHeader(jws)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(receipt.Header{Algorithm: "EdDSA", KeyID: k.KeyID(), Type: receipt.Type}, h); diff != "" {
		t.Errorf("header mismatch (-want +got):\n%s", diff)
	}
	canon, err := receipt.Canonical(want)
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeSegment(t, strings.Split(jws, ".")[1]); string(got) != string(canon) {
		t.Errorf("payload = %s, want the canonical JSON %s", got, canon)
	}

	again, err := k.Sign(want)
	if err != nil {
		t.Fatal(err)
	}
	if again != jws {
		t.Errorf("Sign is not deterministic:\n%s\n%s", jws, again)
	}
}

func TestSign_OverCeilingSignsNothing(t *testing.T) {
	k := newKeyring(t)
	r := sampleReceipt(t)
	r.Amount.Cents = money.MaxCents + 1
	jws, err := k.Sign(r)
	if err == nil || jws != "" {
		t.Fatalf("Sign(amount above ceiling) = %q, %v; want \"\" and an error", jws, err)
	}
	if !errors.Is(err, money.ErrOutOfRange) || !strings.Contains(err.Error(), "amount.cents") {
		t.Errorf("Sign error %v, want money.ErrOutOfRange naming amount.cents", err)
	}
}

func TestVerify_Refusals(t *testing.T) {
	signerFile := generateKey(t)
	k := newKeyring(t, signerFile)
	good, err := k.Sign(sampleReceipt(t))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")
	header := decodeObject(t, decodeSegment(t, parts[0]))
	payload := decodeSegment(t, parts[1])
	forger := privateKey(t, generateKey(t))
	owner := privateKey(t, signerFile)

	tests := []struct {
		name    string
		jws     string
		set     receipt.JWKS
		wantErr error
		wantMsg string
	}{
		{"TamperedAmount", withPayload(parts, strings.Replace(string(payload), `"cents":1500`, `"cents":150000`, 1)), k.JWKS(), receipt.ErrBadSignature, "bad signature"},
		{"TamperedAgent", withPayload(parts, strings.Replace(string(payload), `"agent-1"`, `"agent-2"`, 1)), k.JWKS(), receipt.ErrBadSignature, k.KeyID()},
		{"TamperedSignature", parts[0] + "." + parts[1] + "." + flipFirst(parts[2]), k.JWKS(), receipt.ErrBadSignature, "bad signature"},
		{"UnknownKid", good, newKeyring(t).JWKS(), receipt.ErrUnknownKey, k.KeyID()},
		{"EmptyJWKS", good, receipt.JWKS{}, receipt.ErrUnknownKey, "unknown kid"},
		{"ForgedWithSameKid", compact(t, header, payload, forger), k.JWKS(), receipt.ErrBadSignature, "signed by another key"},
		{"WrongAlg", compact(t, with(header, "alg", "HS256"), payload, owner), k.JWKS(), receipt.ErrWrongAlgorithm, "HS256"},
		{"AlgNone", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"`+k.KeyID()+`","typ":"`+receipt.Type+`"}`)) + "." + parts[1] + ".", k.JWKS(), receipt.ErrWrongAlgorithm, "none"},
		{"WrongTyp", compact(t, with(header, "typ", "JWT"), payload, owner), k.JWKS(), receipt.ErrWrongType, "JWT"},
		{"NoKid", compact(t, without(header, "kid"), payload, owner), k.JWKS(), receipt.ErrMalformed, "kid"},
		{"Crit", compact(t, with(header, "crit", []string{"b64"}), payload, owner), k.JWKS(), receipt.ErrMalformed, "crit"},
		{"NotCompact", "not a jws", k.JWKS(), receipt.ErrMalformed, "3 dot-separated parts"},
		{"JSONSerialization", `{"payload":"` + parts[1] + `"}`, k.JWKS(), receipt.ErrMalformed, "compact"},
		{"NonCanonicalPayload", compact(t, header, []byte(" "+string(payload)), owner), k.JWKS(), receipt.ErrMalformed, "canonical"},
		{"UnknownPayloadField", compact(t, header, []byte(`{"extra":1,`+string(payload[1:])), owner), k.JWKS(), receipt.ErrMalformed, "extra"},
		{"MiscasedPayloadField", compact(t, header, []byte(strings.Replace(string(payload), `"agentId"`, `"agentID"`, 1)), owner), k.JWKS(), receipt.ErrMalformed, "round-trip"},
		{"PayloadOverCeiling", compact(t, header, []byte(strings.Replace(string(payload), `"cents":1500,`, `"cents":9007199254740993,`, 1)), owner), k.JWKS(), money.ErrOutOfRange, "cents"},
		// Each segment's last character has unused low bits (127, 586 and 86
		// characters: 2, 4 and 4 bits); a lenient decoder ignores them.
		{"HeaderPaddingBits", setUnusedBit(t, parts[0]) + "." + parts[1] + "." + parts[2], k.JWKS(), receipt.ErrMalformed, "JWS header: not canonical"},
		{"PayloadPaddingBits", parts[0] + "." + setUnusedBit(t, parts[1]) + "." + parts[2], k.JWKS(), receipt.ErrMalformed, "JWS payload: not canonical"},
		{"SignaturePaddingBits", parts[0] + "." + parts[1] + "." + setUnusedBit(t, parts[2]), k.JWKS(), receipt.ErrMalformed, "JWS signature: not canonical"},
		{"LineBreakInSignature", parts[0] + "." + parts[1] + "." + parts[2][:40] + "\n" + parts[2][40:], k.JWKS(), receipt.ErrMalformed, "line break"},
		{"KeyWithPaddingBits", good, receipt.JWKS{Keys: []receipt.JWK{withUnusedBit(t, k.JWKS().Keys[0])}}, receipt.ErrMalformed, "x must be"},
		{"KeyOfWrongType", good, receipt.JWKS{Keys: []receipt.JWK{{KeyType: "EC", Curve: "P-256", X: "AAAA", KeyID: k.KeyID()}}}, receipt.ErrWrongAlgorithm, "P-256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := receipt.Verify(tt.jws, tt.set)
			if err == nil {
				t.Fatalf("Verify = receipt %s, want an error", got.ID)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Verify error %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Verify error %q, want it to say %q", err, tt.wantMsg)
			}
		})
	}
}

// TestRotation: the new key signs, the old key still verifies what it signed,
// and a verifier with only the old JWKS does not know the new key.
func TestRotation(t *testing.T) {
	oldFile, newFile := generateKey(t), generateKey(t)
	before := newKeyring(t, oldFile)
	oldReceipt, err := before.Sign(sampleReceipt(t))
	if err != nil {
		t.Fatal(err)
	}

	for name, after := range map[string]*receipt.Keyring{
		"OldKeyPrivate":    newKeyring(t, newFile, oldFile),
		"OldKeyPublicOnly": newKeyring(t, newFile, publicOnly(t, oldFile)),
	} {
		t.Run(name, func(t *testing.T) {
			if got, want := after.KeyID(), newKeyring(t, newFile).KeyID(); got != want {
				t.Errorf("KeyID() after rotation = %q, want the new key %q", got, want)
			}
			newReceipt, err := after.Sign(sampleReceipt(t))
			if err != nil {
				t.Fatal(err)
			}
			if h, _ := receipt.ParseHeader(newReceipt); h.KeyID != after.KeyID() {
				t.Errorf("new receipt kid = %q, want %q", h.KeyID, after.KeyID())
			}
			for _, jws := range []string{oldReceipt, newReceipt} {
				if _, err := receipt.Verify(jws, after.JWKS()); err != nil {
					t.Errorf("Verify with the rotated JWKS: %v", err)
				}
			}
			if _, err := receipt.Verify(newReceipt, before.JWKS()); !errors.Is(err, receipt.ErrUnknownKey) {
				t.Errorf("Verify(new receipt, old JWKS) error %v, want ErrUnknownKey", err)
			}
		})
	}
}

// compact signs payload under header with priv, as an attacker or a buggy
// issuer could.
func compact(tb testing.TB, header map[string]any, payload []byte, priv ed25519.PrivateKey) string {
	tb.Helper()
	input := base64.RawURLEncoding.EncodeToString(encodeObject(tb, header)) + "." + base64.RawURLEncoding.EncodeToString(payload)
	return input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, []byte(input)))
}

func withPayload(parts []string, payload string) string {
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + parts[2]
}

func with(m map[string]any, key string, v any) map[string]any {
	out := map[string]any{key: v}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

func without(m map[string]any, key string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// setUnusedBit returns seg with the lowest bit of its last character set: a
// bit past the segment's last byte, which a lenient base64url decoder
// ignores, so the result decodes to the same bytes there.
func setUnusedBit(tb testing.TB, seg string) string {
	tb.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if len(seg)%4 == 0 {
		tb.Fatalf("segment of %d characters has no unused bits", len(seg))
	}
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	if last&1 != 0 {
		tb.Fatalf("segment %q already ends in a set unused bit", seg)
	}
	out := seg[:len(seg)-1] + string(alphabet[last|1])
	if a, b := decodeSegment(tb, seg), decodeSegment(tb, out); !bytes.Equal(a, b) {
		tb.Fatalf("setUnusedBit(%q) = %q decodes to other bytes", seg, out)
	}
	return out
}

// withUnusedBit is k with an unused bit of x set: the same public key,
// spelled another way.
func withUnusedBit(tb testing.TB, k receipt.JWK) receipt.JWK {
	tb.Helper()
	k.X = setUnusedBit(tb, k.X)
	return k
}

func flipFirst(seg string) string {
	b := []byte(seg)
	if b[0] == 'A' {
		b[0] = 'B'
	} else {
		b[0] = 'A'
	}
	return string(b)
}

func decodeSegment(tb testing.TB, seg string) []byte {
	tb.Helper()
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func privateKey(tb testing.TB, file []byte) ed25519.PrivateKey {
	tb.Helper()
	var f struct{ D string }
	if err := json.Unmarshal(file, &f); err != nil {
		tb.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(decodeSegment(tb, f.D))
}

// TestVerify_DocumentedExample keeps docs/receipts.md honest: its example
// receipt (signed with the RFC 8037 test key) verifies against its JWKS, and
// signing the same receipt again yields the same bytes.
func TestVerify_DocumentedExample(t *testing.T) {
	jws := strings.TrimSpace(string(readFile(t, "testdata/example/receipt.jws")))
	set, err := receipt.ParseJWKS(readFile(t, "testdata/example/jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := receipt.Verify(jws, set)
	if err != nil {
		t.Fatalf("Verify(documented example): %v", err)
	}
	want := sampleReceipt(t)
	want.Grants = want.Grants[:1]
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("documented example mismatch (-want +got):\n%s", diff)
	}
	k := newKeyring(t, []byte(`{"kty":"OKP","crv":"Ed25519","d":"`+rfc8037D+`","x":"`+rfc8037X+`"}`))
	if again, err := k.Sign(want); err != nil || again != jws {
		t.Errorf("Sign(example) = %q, %v; want the documented JWS", again, err)
	}
}
