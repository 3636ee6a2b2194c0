package idempotency

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/gowebpki/jcs"
)

// MaxKeyLen is the longest Idempotency-Key the middleware accepts.
const MaxKeyLen = 255

// Domain-separation labels, so a hash made for one purpose never equals one
// made for another.
const (
	labelKey         = "stipend/idempotency/key/v1"
	labelFingerprint = "stipend/idempotency/fingerprint/v1"
	labelCollection  = "stipend/idempotency/collection/v1"
)

// HashKey returns the document ID of a key: the hex SHA-256 of the deployment
// namespace, the route and the raw key (length-prefixed, so no two different
// triples collide by concatenation). The caller's identity is deliberately
// not part of it: two callers reusing one key on one route meet at one row
// and conflict (their fingerprints differ) instead of replaying each other's
// result.
func HashKey(namespace, route, key string) string {
	return sum(labelKey, namespace, route, key)
}

// Fingerprint returns the hex SHA-256 of what makes two requests "the same":
// method, route, canonical body and the verified principal (empty when the
// route has none). A JSON body is canonicalized (RFC 8785), so key order and
// whitespace do not matter; any other body is taken byte for byte. The
// principal is hashed, never stored.
func Fingerprint(method, route string, body []byte, principal string) string {
	canonical := body
	if len(body) > 0 {
		if c, err := jcs.Transform(body); err == nil {
			canonical = c
		}
	}
	return sum(labelFingerprint, strings.ToUpper(method), route, string(canonical), principal)
}

// CollectionName returns the deterministic collection (group) name of a
// deployment namespace in a shared database: "idem_" and 32 hex digits. The
// namespace itself never appears in the database.
func CollectionName(namespace string) string {
	return "idem_" + sum(labelCollection, namespace)[:32]
}

func sum(label string, parts ...string) string {
	h := sha256.New()
	writePart(h, label)
	for _, p := range parts {
		writePart(h, p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func writePart(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

// FormatReference returns the sanitized reference "<backend>/<collection>/<id>".
func FormatReference(backend, collection, id string) string {
	return backend + "/" + collection + "/" + id
}

// ParseReference splits a reference made by FormatReference, checking that
// the ID looks like a HashKey result (so a raw key pasted by mistake is
// refused rather than looked up).
func ParseReference(ref string) (backend, collection, id string, err error) {
	parts := strings.Split(ref, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return "", "", "", fmt.Errorf("reference %q: want <backend>/<collection>/<hashed-id>", ref)
	}
	if !ValidID(parts[2]) {
		return "", "", "", fmt.Errorf("reference %q: the id is not a 64-digit lower-case hex hash", ref)
	}
	return parts[0], parts[1], parts[2], nil
}

// ValidID reports whether id has the form of a HashKey result.
func ValidID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// truncate bounds a correlation id to MaxCorrelationLen bytes.
func truncate(s string) string {
	if len(s) > MaxCorrelationLen {
		return s[:MaxCorrelationLen]
	}
	return s
}

// Bounded returns a copy of a with OperationID and TraceID cut to
// MaxCorrelationLen bytes; backends store what it returns.
func (a Attempt) Bounded() Attempt {
	a.OperationID = truncate(a.OperationID)
	a.TraceID = truncate(a.TraceID)
	return a
}

// Validate checks an Attempt before a backend stores it.
func (a Attempt) Validate() error {
	if !ValidID(a.ID) {
		return fmt.Errorf("attempt.id: not a HashKey result")
	}
	if a.Fingerprint == "" {
		return fmt.Errorf("attempt.fingerprint: empty")
	}
	return nil
}
