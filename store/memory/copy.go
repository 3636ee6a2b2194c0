package memory

import (
	"maps"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
)

// The copy functions return values that share no maps, slices or pointers
// with stored state, so callers may change them freely.

func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

func copyAccount(a *entitlement.Account) entitlement.Account {
	c := *a
	c.Metadata = maps.Clone(a.Metadata)
	return c
}

func copyPayment(p *payment.Payment) payment.Payment {
	c := *p
	c.Grant = copyGrant(p.Grant)
	c.SucceededAt = copyTime(p.SucceededAt)
	c.FailedAt = copyTime(p.FailedAt)
	c.RefundedAt = copyTime(p.RefundedAt)
	c.EntitlementIDs = slices.Clone(p.EntitlementIDs)
	return c
}

func copyGrant(g payment.Grant) payment.Grant {
	g.Scope.Tools = slices.Clone(g.Scope.Tools)
	g.ValidUntil = copyTime(g.ValidUntil)
	g.ExpiresAt = copyTime(g.ExpiresAt)
	return g
}

func copyReceipt(r *receipt.Signed) receipt.Signed {
	c := *r
	c.Grants = make([]receipt.Grant, len(r.Grants))
	for i, g := range r.Grants {
		g.Scope.Tools = slices.Clone(g.Scope.Tools)
		g.ValidUntil = copyTime(g.ValidUntil)
		g.ExpiresAt = copyTime(g.ExpiresAt)
		c.Grants[i] = g
	}
	return c
}

// utc returns t in UTC, leaving the zero time alone.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
