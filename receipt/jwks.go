package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
)

// The JOSE names of Stipend's only key type (RFC 8037).
const (
	KeyType   = "OKP"
	Curve     = "Ed25519"
	Algorithm = "EdDSA"
	KeyUse    = "sig"
)

// JWK is an RFC 8037 OKP public key as the JWKS publishes it.
type JWK struct {
	KeyType   string `json:"kty"`
	Curve     string `json:"crv"`
	X         string `json:"x"`
	KeyID     string `json:"kid"`
	Algorithm string `json:"alg,omitempty"`
	Use       string `json:"use,omitempty"`
}

// JWKS is a JSON Web Key Set, served at /.well-known/jwks.json: every key
// that may have signed a receipt, the active one first.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// ParseJWKS decodes a JWKS document. Keys of other types are kept (Verify
// refuses them by name) so a set shared with other services still loads.
func ParseJWKS(data []byte) (JWKS, error) {
	var set JWKS
	if err := json.Unmarshal(data, &set); err != nil {
		return JWKS{}, fmt.Errorf("%w JWKS: %v", ErrMalformed, err)
	}
	if set.Keys == nil {
		return JWKS{}, fmt.Errorf("%w JWKS: no \"keys\" array", ErrMalformed)
	}
	return set, nil
}

// publicKey returns the Ed25519 key of k, checking its type, curve and
// algorithm.
func (k JWK) publicKey() (ed25519.PublicKey, error) {
	if k.KeyType != KeyType || k.Curve != Curve {
		return nil, fmt.Errorf("%w: key %q is kty %q crv %q, want %s %s", ErrWrongAlgorithm, k.KeyID, k.KeyType, k.Curve, KeyType, Curve)
	}
	if k.Algorithm != "" && k.Algorithm != Algorithm {
		return nil, fmt.Errorf("%w: key %q is for alg %q, want %s", ErrWrongAlgorithm, k.KeyID, k.Algorithm, Algorithm)
	}
	x, err := base64url.DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w key %q: x must be %d base64url bytes", ErrMalformed, k.KeyID, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(x), nil
}

// base64url is the receipt package's one base64url decoding (RFC 7515 §2:
// unpadded, and strict). The last character of a segment whose length is not
// a multiple of 4 carries bits past the last byte; a lenient decoder ignores
// them, so each such character has siblings that decode to the same bytes
// (a receipt's 64-byte signature has 16 spellings). Strict refuses any but
// the one with those bits zero, so one receipt has one JWS, and one key one x.
var base64url = base64.RawURLEncoding.Strict()

// find returns the key named kid.
func (s JWKS) find(kid string) (JWK, bool) {
	for _, k := range s.Keys {
		if k.KeyID == kid {
			return k, true
		}
	}
	return JWK{}, false
}

// Thumbprint returns the RFC 7638 JWK thumbprint of an Ed25519 public key:
// base64url(SHA-256({"crv":"Ed25519","kty":"OKP","x":"…"})). It is the kid.
func Thumbprint(pub ed25519.PublicKey) string {
	var b bytes.Buffer
	b.WriteString(`{"crv":"Ed25519","kty":"OKP","x":"`)
	b.WriteString(base64.RawURLEncoding.EncodeToString(pub))
	b.WriteString(`"}`)
	sum := sha256.Sum256(b.Bytes())
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func publicJWK(pub ed25519.PublicKey) JWK {
	return JWK{
		KeyType:   KeyType,
		Curve:     Curve,
		X:         base64.RawURLEncoding.EncodeToString(pub),
		KeyID:     Thumbprint(pub),
		Algorithm: Algorithm,
		Use:       KeyUse,
	}
}
