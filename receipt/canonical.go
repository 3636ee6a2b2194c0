package receipt

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/stipend-mcp/stipend/money"
)

// Canonical returns the RFC 8785 (JCS) canonical JSON of r: the exact bytes
// that are signed. It validates r first (see Validate), because the
// canonicaliser parses numbers as IEEE 754 doubles and would silently round an
// integer beyond 2^53; an amount past money.MaxCents is an error here and is
// never signed. A nil Grants is written as an empty array.
func Canonical(r Receipt) ([]byte, error) {
	if err := Validate(r); err != nil {
		return nil, err
	}
	if r.Grants == nil {
		r.Grants = []Grant{}
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return jcs.Transform(b)
}

// Validate reports whether r can be signed: a known kind and version, the
// identifying fields present, every amount valid and within ±money.MaxCents,
// every integer within the range RFC 8785 represents exactly. Errors wrap
// ErrInvalid and name the field, such as "grants[0].balance.cents".
func Validate(r Receipt) error {
	switch {
	case r.ID == "":
		return invalid("id", "is required")
	case r.Version != Version:
		return invalid("version", fmt.Sprintf("must be %d", Version))
	case r.Kind != KindPayment && r.Kind != KindRefund:
		return invalid("kind", fmt.Sprintf("must be %q or %q", KindPayment, KindRefund))
	case r.AgentID == "":
		return invalid("agentId", "is required")
	case r.PaymentID == "":
		return invalid("paymentId", "is required")
	case r.IssuedAt.IsZero():
		return invalid("issuedAt", "is required")
	}
	if err := validateMoney("amount", r.Amount); err != nil {
		return err
	}
	for i, g := range r.Grants {
		path := fmt.Sprintf("grants[%d]", i)
		if g.EntitlementID == "" {
			return invalid(path+".entitlementId", "is required")
		}
		if !g.Balance.IsZero() {
			if err := validateMoney(path+".balance", g.Balance); err != nil {
				return err
			}
		}
		if g.Limit > money.MaxCents || g.Limit < -money.MaxCents {
			return invalid(path+".limit", fmt.Sprintf("must be between %d and %d", -money.MaxCents, money.MaxCents))
		}
	}
	return nil
}

func validateMoney(path string, m money.Money) error {
	err := m.Validate()
	var fe *money.FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: path + "." + fe.Field, Reason: fe.Reason, Err: err}
	}
	if err != nil {
		return &FieldError{Field: path, Reason: err.Error(), Err: err}
	}
	return nil
}

func invalid(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

// FieldError is a receipt field that cannot be signed. It matches ErrInvalid
// with errors.Is, and the money sentinel behind it (money.ErrOutOfRange) too.
type FieldError struct {
	Field  string
	Reason string
	Err    error
}

func (e *FieldError) Error() string { return "invalid receipt: " + e.Field + ": " + e.Reason }

// Is makes every FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the cause, such as money.ErrOutOfRange.
func (e *FieldError) Unwrap() error { return e.Err }
