package unit

import (
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
)

// Normalized returns e as a backend keeps it: a zero Status active, a zero
// CreatedAt now, a zero Granted of credits the balance, every instant
// rounded to the backend's precision by round, and no slice or map shared
// with the caller. Every backend normalizes with it.
func Normalized(e entitlement.Entitlement, now time.Time, round func(time.Time) time.Time) entitlement.Entitlement {
	e = e.Clone()
	if e.Status == "" {
		e.Status = entitlement.StatusActive
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	if e.Type == entitlement.TypeCredits && e.Credits.Granted.IsZero() {
		e.Credits.Granted = e.Credits.Balance
	}
	keepZero := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return round(t)
	}
	ptr := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := round(*t)
		return &u
	}
	e.CreatedAt, e.ExpiresAt, e.RevokedAt = round(e.CreatedAt), ptr(e.ExpiresAt), ptr(e.RevokedAt)
	switch e.Type {
	case entitlement.TypeQuota:
		e.Quota.ResetAt, e.Quota.Anchor = round(e.Quota.ResetAt), round(e.Quota.Anchor)
	case entitlement.TypeSubscription:
		e.Subscription.ValidFrom, e.Subscription.ValidUntil = keepZero(e.Subscription.ValidFrom), ptr(e.Subscription.ValidUntil)
	}
	if s := &e.Limits.Spend; s.Period != "" {
		s.ResetAt, s.Anchor = round(s.ResetAt), round(s.Anchor)
	}
	for i := range e.Alerts {
		e.Alerts[i].TriggeredAt = ptr(e.Alerts[i].TriggeredAt)
	}
	for i := range e.Holds {
		e.Holds[i].ExpiresAt = round(e.Holds[i].ExpiresAt)
	}
	return e
}
