package payment

import (
	"fmt"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
)

// Validate checks what every store relies on before it stores p. Errors are
// *field.Error values naming the field.
func (p *Payment) Validate() error {
	switch {
	case p.IdempotencyKey == "":
		return &field.Error{Field: "idempotencyKey", Reason: "is required"}
	case p.AgentID == "":
		return &field.Error{Field: "agentId", Reason: "is required"}
	case !p.Grant.Type.Valid():
		return &field.Error{Field: "grant.type", Reason: fmt.Sprintf("%q is not an entitlement type", p.Grant.Type)}
	case p.Grant.Type == entitlement.TypeQuota && !p.Grant.Period.Valid():
		return &field.Error{Field: "grant.period", Reason: fmt.Sprintf("%q is not a quota period", p.Grant.Period)}
	}
	if err := p.Amount.Validate(); err != nil {
		return field.Within("amount", err)
	}
	if p.Amount.Cents < 0 {
		return &field.Error{Field: "amount.cents", Reason: "must not be negative"}
	}
	if p.Checkout != nil {
		if p.Checkout.SessionID == "" {
			return &field.Error{Field: "checkout.sessionId", Reason: "is required"}
		}
		if !entitlement.ValidInstant(p.Checkout.ExpiresAt) {
			return &field.Error{Field: "checkout.expiresAt", Reason: "must be within the years 0001–9999 in UTC"}
		}
	}
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"grant.validUntil", p.Grant.ValidUntil}, {"grant.expiresAt", p.Grant.ExpiresAt}} {
		if f.t != nil && !entitlement.ValidInstant(*f.t) {
			return &field.Error{Field: f.name, Reason: "must be within the years 0001–9999 in UTC"}
		}
	}
	return nil
}
