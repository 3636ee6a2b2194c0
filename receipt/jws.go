package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"
)

// Type is the JWS "typ" header of a receipt (RFC 7515 §4.1.9, RFC 8725 §3.11
// explicit typing), so a receipt cannot be mistaken for any other signed
// token that shares its keys.
const Type = "stipend-receipt+jws"

// Sign returns the compact JWS of r: header {"alg":"EdDSA","kid":…,"typ":Type},
// payload the RFC 8785 canonical JSON of r. Ed25519 is deterministic, so the
// same receipt always yields the same JWS; Sign is a pure SignFunc. A receipt
// that fails Validate, such as an amount beyond money.MaxCents, is an error
// and nothing is signed.
func (k *Keyring) Sign(r Receipt) (string, error) {
	payload, err := Canonical(r)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: k.signing, KeyID: k.kid, Algorithm: Algorithm}},
		(&jose.SignerOptions{}).WithType(Type),
	)
	if err != nil {
		return "", fmt.Errorf("receipt signer: %w", err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign receipt %s: %w", r.ID, err)
	}
	return obj.CompactSerialize()
}

// Verify checks a compact JWS receipt against set and returns the receipt it
// carries. It refuses, with an error naming the reason: a malformed JWS
// (ErrMalformed; a segment that is not canonical base64url included, so
// one receipt has one JWS that verifies), an alg other than EdDSA (ErrWrongAlgorithm), a typ other
// than Type (ErrWrongType), a kid not in set (ErrUnknownKey), a signature that
// does not verify (ErrBadSignature), and a payload that is not exactly the
// canonical JSON of a valid receipt (ErrMalformed, ErrInvalid).
func Verify(jws string, set JWKS) (Receipt, error) {
	jws = strings.TrimSpace(jws)
	h, err := parseHeader(jws)
	if err != nil {
		return Receipt{}, err
	}
	jwk, ok := set.find(h.KeyID)
	if !ok {
		return Receipt{}, fmt.Errorf("%w %q: no key with that kid in the JWKS", ErrUnknownKey, h.KeyID)
	}
	pub, err := jwk.publicKey()
	if err != nil {
		return Receipt{}, err
	}
	obj, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return Receipt{}, fmt.Errorf("%w JWS: %v", ErrMalformed, err)
	}
	payload, err := obj.Verify(pub)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: the receipt does not verify with key %q (changed after signing, or signed by another key)", ErrBadSignature, h.KeyID)
	}
	return decodePayload(payload)
}

// Verify checks a receipt against the keyring's own keys.
func (k *Keyring) Verify(jws string) (Receipt, error) { return Verify(jws, k.jwks) }

// Header is the protected header of a receipt JWS.
type Header struct {
	Algorithm string `json:"alg"`
	KeyID     string `json:"kid"`
	Type      string `json:"typ"`
}

// ParseHeader returns the protected header of a compact JWS receipt, checked
// for alg EdDSA, typ Type and a kid, without verifying anything else. Use it
// to say which key signed a receipt; trust nothing else before Verify.
func ParseHeader(jws string) (Header, error) { return parseHeader(jws) }

func parseHeader(jws string) (Header, error) {
	raw, err := headerOf(jws)
	if err != nil {
		return Header{}, err
	}
	var h struct {
		Header
		Crit []string `json:"crit"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return Header{}, fmt.Errorf("%w JWS header: %v", ErrMalformed, err)
	}
	switch {
	case h.Algorithm != Algorithm:
		return Header{}, fmt.Errorf("%w: alg is %q, want %q", ErrWrongAlgorithm, h.Algorithm, Algorithm)
	case h.Type != Type:
		return Header{}, fmt.Errorf("%w: typ is %q, want %q", ErrWrongType, h.Type, Type)
	case h.KeyID == "":
		return Header{}, fmt.Errorf("%w JWS header: no kid", ErrMalformed)
	case len(h.Crit) > 0:
		return Header{}, fmt.Errorf("%w JWS header: unsupported crit %q", ErrMalformed, h.Crit)
	}
	return h.Header, nil
}

// segmentNames names the three segments of a compact JWS, in order.
var segmentNames = [3]string{"header", "payload", "signature"}

// headerOf returns the decoded protected header of a compact JWS, after
// checking that it has three segments and that each is canonical base64url
// (see base64url): go-jose decodes leniently, so this is where a JWS that
// differs from the signed one only in unused bits is refused.
func headerOf(jws string) ([]byte, error) {
	parts := strings.Split(strings.TrimSpace(jws), ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w JWS: want 3 dot-separated parts (compact serialization), got %d", ErrMalformed, len(parts))
	}
	var header []byte
	for i, part := range parts {
		// The decoder skips line breaks, Strict or not; they are spellings too.
		if j := strings.IndexAny(part, "\r\n"); j >= 0 {
			return nil, fmt.Errorf("%w JWS %s: not canonical unpadded base64url (a line break at byte %d)", ErrMalformed, segmentNames[i], j)
		}
		b, err := base64url.DecodeString(part)
		if err != nil {
			return nil, fmt.Errorf("%w JWS %s: not canonical unpadded base64url (%v)", ErrMalformed, segmentNames[i], err)
		}
		if i == 0 {
			header = b
		}
	}
	return header, nil
}

// decodePayload decodes a verified payload strictly: no unknown, duplicate
// or differently cased members, no trailing data, a valid receipt, and bytes
// that are exactly its canonical JSON, so what was signed is what is returned.
func decodePayload(payload []byte) (Receipt, error) {
	var r Receipt
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Receipt{}, fmt.Errorf("%w payload: %w", ErrMalformed, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Receipt{}, fmt.Errorf("%w payload: data after the receipt", ErrMalformed)
	}
	canon, err := jcs.Transform(payload)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w payload: %w", ErrMalformed, err)
	}
	if !bytes.Equal(canon, payload) {
		return Receipt{}, fmt.Errorf("%w payload: not RFC 8785 canonical JSON", ErrMalformed)
	}
	again, err := Canonical(r)
	if err != nil {
		return Receipt{}, err
	}
	if !bytes.Equal(again, payload) {
		return Receipt{}, fmt.Errorf("%w payload: does not round-trip to the same canonical receipt", ErrMalformed)
	}
	return r, nil
}
