package payment

import (
	"slices"
	"time"
)

// Clone returns a copy of p that shares no slice or pointer with it.
func (p *Payment) Clone() Payment {
	c := *p
	c.Grant = p.Grant.Clone()
	c.SucceededAt = cloneTime(p.SucceededAt)
	c.FailedAt = cloneTime(p.FailedAt)
	c.RefundedAt = cloneTime(p.RefundedAt)
	c.EntitlementIDs = slices.Clone(p.EntitlementIDs)
	c.DisputedAt = cloneTime(p.DisputedAt)
	c.DisputeWonAt = cloneTime(p.DisputeWonAt)
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
	g.ValidUntil = cloneTime(g.ValidUntil)
	g.ExpiresAt = cloneTime(g.ExpiresAt)
	return g
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}
