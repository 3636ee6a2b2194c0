package unit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// InboundKey returns the storage key of an inbound provider event:
// "{source}__{eventId}" when both parts are plain ([A-Za-z0-9_-], as Stripe's
// IDs are), otherwise "h__" and a hex SHA-256 of both, so any ID is a valid
// Firestore document ID and two different events never share a key.
// RecordInboundEvent and a payment change with PaymentChange.Inbound record
// under the same key, so they share one record.
func InboundKey(source, eventID string) string {
	if plain(source) && plain(eventID) && !strings.Contains(source, "__") && len(source)+len(eventID) < 1000 {
		return source + "__" + eventID
	}
	sum := sha256.Sum256([]byte(source + "\x00" + eventID))
	return "h__" + hex.EncodeToString(sum[:])
}

func plain(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return s != "h"
}
