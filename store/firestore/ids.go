package firestore

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// docID returns s as a Firestore document ID. A plain value (1–200 of
// [A-Za-z0-9_-], as UUIDs and most agent IDs are) is used as is, so the
// console stays readable; anything else ("/", ".", reserved "__x__" names,
// long or non-ASCII values) becomes "h__" and a hex SHA-256, so no ID is ever
// rejected or truncated and two values never share a document.
func docID(s string) string {
	if plainID(s) {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h__" + hex.EncodeToString(sum[:])
}

func plainID(s string) bool {
	if s == "" || len(s) > 200 || strings.HasPrefix(s, "h__") || strings.HasPrefix(s, "__") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
