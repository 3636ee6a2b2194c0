package payment

import (
	"slices"

	"github.com/stipend-mcp/stipend/entitlement"
)

// Clone returns a copy of p that shares no slice or pointer with it.
func (p *Payment) Clone() Payment {
	c := *p
	c.Grant = p.Grant.Clone()
	c.SucceededAt = entitlement.ClonePtr(p.SucceededAt)
	c.FailedAt = entitlement.ClonePtr(p.FailedAt)
	c.RefundedAt = entitlement.ClonePtr(p.RefundedAt)
	c.EntitlementIDs = slices.Clone(p.EntitlementIDs)
	c.DisputedAt = entitlement.ClonePtr(p.DisputedAt)
	c.DisputeWonAt = entitlement.ClonePtr(p.DisputeWonAt)
	if p.RefundedAmount != nil {
		r := *p.RefundedAmount
		c.RefundedAmount = &r
	}
	if p.Checkout != nil {
		co := *p.Checkout
		c.Checkout = &co
	}
	return c
}

// Clone returns a copy of g that shares no slice or pointer with it.
func (g Grant) Clone() Grant {
	g.Scope.Tools = slices.Clone(g.Scope.Tools)
	g.ValidUntil = entitlement.ClonePtr(g.ValidUntil)
	g.ExpiresAt = entitlement.ClonePtr(g.ExpiresAt)
	return g
}
