package entitlement

import (
	"time"

	"github.com/stipend-mcp/stipend/money"
)

// Revoke revokes the active entitlement e at now: a pending lazy reset is
// applied, its open holds past their expiry end expired and the rest are
// released. It returns the IDs of both, which the store marks ended in the
// same transaction. RevokeEntitlement, RefundPayment and DisputePayment
// revoke this way.
func (e *Entitlement) Revoke(now time.Time) (expired, released []string) {
	expired = e.ExpireHolds(now)
	released = e.ReleaseAll(now)
	e.Refresh(now)
	e.Status, e.RevokedAt = StatusRevoked, &now
	return expired, released
}

// CutCredits takes up to part off what the refreshed entitlement e has
// available (its balance less what holds reserve), never below zero, for a
// partial refund of its payment, and returns what it took: zero from an
// entitlement that is not active credits in part's currency. The rest of
// the grant stays usable.
//
// A cut that takes what is left to or below an armed alert's threshold
// triggers it as a charge would: CutAlerts says so.
func (e *Entitlement) CutCredits(part money.Money) money.Money {
	c := &e.Credits
	if e.Type != TypeCredits || e.Status != StatusActive || c.Balance.Currency != part.Currency {
		return money.Money{Currency: part.Currency}
	}
	take := min(part.Cents, max(c.Balance.Cents-c.Held.Cents, 0))
	c.Balance.Cents -= take
	return money.Money{Cents: take, Currency: part.Currency}
}

// CutAlerts settles e's alerts after CutCredits at now: an armed alert the
// cut took to or below its threshold is triggered, and it reports whether
// one was, for the store to write one entitlement.balance_low, as after a
// charge.
func (e *Entitlement) CutAlerts(now time.Time) (crossed bool) {
	if len(e.Alerts) == 0 {
		return false
	}
	crossed, _ = e.settleAlerts(now, true)
	return crossed
}

// Reinstate makes e, revoked at revokedAt by a dispute of its payment,
// active again with what it had left then (its holds stay ended): the
// dispute was decided for the seller. It reports false, changing nothing,
// for an entitlement revoked otherwise (by hand, by a refund) or active.
func (e *Entitlement) Reinstate(revokedAt time.Time) bool {
	if e.Status != StatusRevoked || e.RevokedAt == nil || !e.RevokedAt.Equal(revokedAt) {
		return false
	}
	e.Status, e.RevokedAt = StatusActive, nil
	return true
}
