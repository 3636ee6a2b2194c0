package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// Keyring holds one active Ed25519 signing key and any number of older keys
// that only verify. It is safe for concurrent use and never changes after it
// is made.
type Keyring struct {
	signing ed25519.PrivateKey
	kid     string
	jwks    JWKS // every key, the signing key first
}

// keyFile is the JSON of a key file: an OKP JWK with the private part d
// (a signing key) or without it (a retired key kept for verification).
type keyFile struct {
	KeyType   string `json:"kty"`
	Curve     string `json:"crv"`
	X         string `json:"x"`
	D         string `json:"d,omitempty"`
	KeyID     string `json:"kid"`
	Algorithm string `json:"alg,omitempty"`
	Use       string `json:"use,omitempty"`
}

// GenerateKey makes a new Ed25519 signing key and returns the bytes of its key
// file: a private OKP JWK (RFC 8037) with its kid. Write it with mode 0600.
func GenerateKey() ([]byte, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate Ed25519 key: %w", err)
	}
	return encodeKeyFile(pub, priv)
}

func encodeKeyFile(pub ed25519.PublicKey, priv ed25519.PrivateKey) ([]byte, error) {
	j := publicJWK(pub)
	f := keyFile{
		KeyType: j.KeyType, Curve: j.Curve, X: j.X,
		D:     base64.RawURLEncoding.EncodeToString(priv.Seed()),
		KeyID: j.KeyID, Algorithm: j.Algorithm, Use: j.Use,
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// NewEphemeralKeyring makes a keyring around a fresh in-memory key, for
// development: receipts it signs cannot be verified once the process ends.
func NewEphemeralKeyring() (*Keyring, error) {
	file, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	return LoadKeyring(file)
}

// LoadKeyFiles reads key files and loads them with LoadKeyring: the first
// signs, all verify.
func LoadKeyFiles(paths ...string) (*Keyring, error) {
	files := make([][]byte, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("signing key file: %w", err)
		}
		files[i] = b
	}
	k, err := LoadKeyring(files...)
	var fe *keyFileError
	if errors.As(err, &fe) {
		return nil, fmt.Errorf("signing key file %s: %w", paths[fe.index], fe.err)
	}
	return k, err
}

// LoadKeyring builds a keyring from the contents of key files. The first must
// hold a private key (it signs); the others may be private or public-only
// (retired keys that still verify). Every file's kid, if present, must be the
// RFC 7638 thumbprint of its key, and no key may appear twice.
func LoadKeyring(files ...[]byte) (*Keyring, error) {
	if len(files) == 0 {
		return nil, errors.New("no signing key: give at least one key file")
	}
	k := &Keyring{jwks: JWKS{Keys: make([]JWK, 0, len(files))}}
	for i, data := range files {
		pub, priv, err := decodeKeyFile(data)
		if err == nil && i == 0 && priv == nil {
			err = errors.New("the first key signs, so it must hold the private key \"d\"")
		}
		if err != nil {
			return nil, &keyFileError{index: i, err: err}
		}
		j := publicJWK(pub)
		if _, dup := k.jwks.find(j.KeyID); dup {
			return nil, &keyFileError{index: i, err: fmt.Errorf("key %s is given twice", j.KeyID)}
		}
		if i == 0 {
			k.signing, k.kid = priv, j.KeyID
		}
		k.jwks.Keys = append(k.jwks.Keys, j)
	}
	return k, nil
}

// decodeKeyFile parses one key file; priv is nil for a public-only key.
func decodeKeyFile(data []byte) (ed25519.PublicKey, ed25519.PrivateKey, error) {
	var f keyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("%w key file (want an OKP Ed25519 JWK): %v", ErrMalformed, err)
	}
	pub, err := JWK{KeyType: f.KeyType, Curve: f.Curve, X: f.X, KeyID: f.KeyID, Algorithm: f.Algorithm}.publicKey()
	if err != nil {
		return nil, nil, err
	}
	if f.Use != "" && f.Use != KeyUse {
		return nil, nil, fmt.Errorf("%w key file: use is %q, want %q", ErrMalformed, f.Use, KeyUse)
	}
	if kid := Thumbprint(pub); f.KeyID != "" && f.KeyID != kid {
		return nil, nil, fmt.Errorf("%w key file: kid %q is not the key's RFC 7638 thumbprint %q", ErrMalformed, f.KeyID, kid)
	}
	if f.D == "" {
		return pub, nil, nil
	}
	seed, err := base64url.DecodeString(f.D)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, nil, fmt.Errorf("%w key file: d must be a %d-byte base64url Ed25519 seed", ErrMalformed, ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if !bytes.Equal(priv.Public().(ed25519.PublicKey), pub) {
		return nil, nil, fmt.Errorf("%w key file: x is not the public key of d", ErrMalformed)
	}
	return pub, priv, nil
}

type keyFileError struct {
	index int
	err   error
}

func (e *keyFileError) Error() string { return fmt.Sprintf("key %d: %v", e.index+1, e.err) }
func (e *keyFileError) Unwrap() error { return e.err }

// KeyID returns the kid of the signing key: its RFC 7638 thumbprint.
func (k *Keyring) KeyID() string { return k.kid }

// JWKS returns the public keys, the signing key first, for
// /.well-known/jwks.json. Retired keys stay in it so old receipts verify.
func (k *Keyring) JWKS() JWKS {
	return JWKS{Keys: append([]JWK(nil), k.jwks.Keys...)}
}
