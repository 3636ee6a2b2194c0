package entitlement

import (
	"fmt"
	"strings"
	"time"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// MaxMetadataKeyLen bounds a metadata key, far below Firestore's 1,500-byte
// field names.
const MaxMetadataKeyLen = 256

// ValidInstant reports whether t can be stored and shown: its UTC year is
// within 0001–9999, what RFC 3339 (JSON) and Firestore timestamps hold. An
// instant near the ends can fall outside once turned to UTC.
func ValidInstant(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y <= 9999
}

// ValidateMetadata checks metadata as every store can keep it: at most
// MaxMetadataEntries entries and MaxMetadataBytes of keys and values; keys
// of 1–MaxMetadataKeyLen bytes, not of the form "__name__" (Firestore
// reserves those). Errors are *field.Error values naming path.
func ValidateMetadata(path string, m map[string]string) error {
	if len(m) > MaxMetadataEntries {
		return &field.Error{Field: path, Reason: fmt.Sprintf("must have at most %d entries", MaxMetadataEntries)}
	}
	n := 0
	for k, v := range m {
		switch {
		case k == "":
			return &field.Error{Field: path, Reason: "keys must not be empty"}
		case len(k) > MaxMetadataKeyLen:
			return &field.Error{Field: path, Reason: fmt.Sprintf("keys must be at most %d bytes", MaxMetadataKeyLen)}
		case len(k) >= 4 && strings.HasPrefix(k, "__") && strings.HasSuffix(k, "__"):
			return &field.Error{Field: path, Reason: fmt.Sprintf("key %q: keys of the form __name__ are reserved", k)}
		}
		n += len(k) + len(v)
	}
	if n > MaxMetadataBytes {
		return &field.Error{Field: path, Reason: fmt.Sprintf("must hold at most %d bytes of keys and values", MaxMetadataBytes)}
	}
	return nil
}

// instantField checks an optional instant.
func instantField(path string, t *time.Time) error {
	if t != nil && !ValidInstant(*t) {
		return &field.Error{Field: path, Reason: "must be within the years 0001–9999 in UTC"}
	}
	return nil
}

// Validate checks what every store relies on before it stores e. Errors are
// *field.Error values naming the field.
func (e *Entitlement) Validate() error {
	switch {
	case e.ID == "":
		return &field.Error{Field: "id", Reason: "is required"}
	case e.AgentID == "":
		return &field.Error{Field: "agentId", Reason: "is required"}
	case !e.Type.Valid():
		return &field.Error{Field: "type", Reason: fmt.Sprintf("%q is not an entitlement type", e.Type)}
	case e.Status != "" && !e.Status.Valid():
		return &field.Error{Field: "status", Reason: fmt.Sprintf("%q is not an entitlement status", e.Status)}
	case e.Scope.Service == "":
		return &field.Error{Field: "scope.service", Reason: "is required"}
	}
	if err := ValidateMetadata("metadata", e.Metadata); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"expiresAt", e.ExpiresAt}, {"subscription.validFrom", &e.Subscription.ValidFrom}, {"subscription.validUntil", e.Subscription.ValidUntil}} {
		if err := instantField(f.name, f.t); err != nil {
			return err
		}
	}
	if err := e.validateControls(); err != nil {
		return err
	}
	switch e.Type {
	case TypeCredits:
		if err := moneyField("credits.balance", e.Credits.Balance); err != nil {
			return err
		}
		if e.Credits.Balance.Cents < 0 {
			return &field.Error{Field: "credits.balance.cents", Reason: "must not be negative"}
		}
		if !e.Credits.Granted.IsZero() {
			return moneyField("credits.granted", e.Credits.Granted)
		}
	case TypeQuota:
		if e.Quota.Limit < 0 || e.Quota.Remaining < 0 || !e.Quota.Period.Valid() {
			return &field.Error{Field: "quota", Reason: "needs a valid period and non-negative limit and remaining"}
		}
	}
	return nil
}

// moneyField validates m and names its field under path.
func moneyField(path string, m money.Money) error { return field.Within(path, m.Validate()) }

// validateControls checks the spend controls and alerts once the balance
// they refer to is known to be valid.
func (e *Entitlement) validateControls() error {
	if e.Type == TypeCredits && moneyField("credits.balance", e.Credits.Balance) != nil {
		return nil // the balance's own error comes first
	}
	if err := e.validateLimits(); err != nil {
		return err
	}
	return e.validateAlerts()
}
