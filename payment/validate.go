package payment

import (
	"errors"
	"fmt"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// Validate checks what every store relies on before it stores p. Errors are
// *entitlement.FieldError values naming the field.
func (p *Payment) Validate() error {
	switch {
	case p.IdempotencyKey == "":
		return &entitlement.FieldError{Field: "idempotencyKey", Reason: "is required"}
	case p.AgentID == "":
		return &entitlement.FieldError{Field: "agentId", Reason: "is required"}
	case !p.Grant.Type.Valid():
		return &entitlement.FieldError{Field: "grant.type", Reason: fmt.Sprintf("%q is not an entitlement type", p.Grant.Type)}
	case p.Grant.Type == entitlement.TypeQuota && !p.Grant.Period.Valid():
		return &entitlement.FieldError{Field: "grant.period", Reason: fmt.Sprintf("%q is not a quota period", p.Grant.Period)}
	}
	if err := p.Amount.Validate(); err != nil {
		var fe *money.FieldError
		if errors.As(err, &fe) {
			return &entitlement.FieldError{Field: "amount." + fe.Field, Reason: fe.Reason}
		}
		return err
	}
	if p.Amount.Cents < 0 {
		return &entitlement.FieldError{Field: "amount.cents", Reason: "must not be negative"}
	}
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"grant.validUntil", p.Grant.ValidUntil}, {"grant.expiresAt", p.Grant.ExpiresAt}} {
		if f.t != nil && !entitlement.ValidInstant(*f.t) {
			return &entitlement.FieldError{Field: f.name, Reason: "must be within the years 0001–9999 in UTC"}
		}
	}
	return nil
}
