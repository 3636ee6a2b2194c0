package receipt

import (
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/stipend-mcp/stipend/field"
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
// ErrInvalid and a *field.Error naming the field, such as
// "grants[0].balance.cents".
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
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, field.Within(path, err))
	}
	return nil
}

// invalid is a receipt field that cannot be signed: a *field.Error that
// matches ErrInvalid too.
func invalid(path, reason string) error {
	return fmt.Errorf("%w: %w", ErrInvalid, &field.Error{Field: path, Reason: reason})
}
