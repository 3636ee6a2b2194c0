package entitlement

import (
	"slices"
	"time"
)

// Leases let several instances of a store spend one hot entitlement without
// all writing its document: each takes a lease, a slice of what the
// entitlement can spend, in a document of its own, and charges against it.
// The accounting, in cents (credits) or units (quota), where settled is the
// stored Credits.Balance or Quota.Remaining:
//
//	reserved  = Σ Limit of the open leases (the registry, Entitlement.Leases)
//	free      = settled − held − reserved   ≥ 0, and ≥ 1 while a lease is open
//	0 ≤ Spent ≤ Limit on every lease
//	exact     = settled − Σ Spent of the open leases
//	available = exact − held (what a read shows as balance − held)
//
// A charge against a lease reads the lease in its own transaction and only
// spends its Limit − Spent, so what all leases spend never exceeds reserved
// and free never goes negative: no clock or TTL is needed for safety. A lease
// is closed by folding it (Fold): its Spent is taken from settled and its
// Limit from reserved, in one transaction with the lease document.
//
// Because at least one unit stays outside every lease (leaseSize), exact is
// at least 1 while any lease is open: a lease charge never empties the
// entitlement, and the last unit is always charged on the entitlement itself,
// after a gather (Gather) has folded every lease. The end of a balance, its
// exact denials and its one entitlement.depleted event are therefore those
// of an entitlement without leases. A quota lease belongs to one period (its
// Period); the transaction that starts a new period gathers first, so a new
// period starts with none. Subscriptions are never leased.

// OpenLease is an entitlement's record of one open lease: its ID, the most
// it may spend (cents for credits, units for quota), and its liveness
// deadline (Until; zero: none). An owner that is alive renews its leases'
// deadlines (RenewLeases) in the transactions it makes on the entitlement;
// after the deadline any instance may fold the lease (ExpiredLeases), so
// the share of an instance that died is not reserved for ever. The
// deadline is about liveness only: a lease folded while its owner still
// spends it is closed, and the owner's next charge on it fails and goes to
// the entitlement, so no clock decides what is spent.
type OpenLease struct {
	ID    string
	Limit int64
	Until time.Time
}

// Lease is a slice of an entitlement reserved for one store instance (Owner),
// as kept in the lease's own document.
type Lease struct {
	ID            string
	EntitlementID string
	Owner         string
	Limit         int64
	Spent         int64
	// Period is, for a quota, the ResetAt of the period the lease belongs to:
	// it charges nothing from that instant on. Zero for credits.
	Period time.Time
	// Base is what lay outside every lease (settled − reserved) when the
	// lease was taken; with Limit − Spent it estimates the balance after a
	// lease charge (no lease knows what the others have spent).
	Base int64
	// Closed is set when the lease is folded: it never charges again.
	Closed bool
}

// Left is what l can still charge.
func (l *Lease) Left() int64 { return l.Limit - l.Spent }

// settled is what e's document holds: the balance in cents, or the quota's
// remaining units.
func (e *Entitlement) settled() int64 {
	switch e.Type {
	case TypeCredits:
		return e.Credits.Balance.Cents
	case TypeQuota:
		return e.Quota.Remaining
	}
	return 0
}

func (e *Entitlement) addSettled(n int64) {
	switch e.Type {
	case TypeCredits:
		e.Credits.Balance.Cents += n
	case TypeQuota:
		e.Quota.Remaining += n
	}
}

// reserved is what e's open leases may spend.
func (e *Entitlement) reserved() int64 {
	var n int64
	for _, l := range e.Leases {
		n += l.Limit
	}
	return n
}

// Free is what e can spend outside its leases and holds: the settled balance
// or remaining quota, less what holds and leases reserve. Direct charges,
// holds and new leases come out of it. It does not apply the lazy quota
// reset: callers refresh e first.
func (e *Entitlement) Free() int64 { return e.settled() - e.held() - e.reserved() }

// LeaseSize is how much a new lease on e at now may reserve for a lane that
// wants want: at most half of what is free, keeping at least one unit
// outside every lease, and nothing for a subscription or an entitlement that
// cannot be charged (revoked, expired). Every lease is sized here, so a bound
// on what may be spent before a boundary (a spend limit, an alert threshold)
// is applied in one place.
//
// Spend controls bound it: a lease is a slice of what can be spent before
// the next boundary (Headroom: an armed low-balance threshold), so lease
// charges never cross one and the charge that does is made on the
// entitlement, which writes the one entitlement.balance_low. An entitlement
// with a spend limit per period is never leased: its period's spend is kept
// on the entitlement, exactly, by direct charges.
func (e *Entitlement) LeaseSize(now time.Time, want int64) int64 {
	if e.Type == TypeSubscription || e.Status != StatusActive || e.Expired(now) || e.Limits.Spend.Period != "" {
		return 0
	}
	return leaseSize(e.unleased(now), want)
}

// unleased is what e can spend outside its leases and holds before a
// boundary: Free, bounded by Headroom less what the leases reserve.
func (e *Entitlement) unleased(now time.Time) int64 {
	return min(e.Free(), e.Headroom(now)-e.reserved())
}

// leaseSize is the rule of LeaseSize on what is available.
func leaseSize(available, want int64) int64 {
	n := min(want, (available-1)/2)
	return max(n, 0)
}

// TakeLease records a new open lease of size (from LeaseSize, > 0) on e for
// owner, live until until (zero: no deadline), and returns its document. It
// belongs to e's current period (callers refresh e first).
func (e *Entitlement) TakeLease(id, owner string, size int64, until time.Time) Lease {
	e.Leases = append(e.Leases, OpenLease{ID: id, Limit: size, Until: until})
	l := Lease{ID: id, EntitlementID: e.ID, Owner: owner, Limit: size, Base: e.settled() - e.reserved()}
	if e.Type == TypeQuota {
		l.Period = e.Quota.ResetAt
	}
	return l
}

// RenewLeases moves the deadline of e's open leases ids to until.
func (e *Entitlement) RenewLeases(ids []string, until time.Time) {
	for i := range e.Leases {
		if slices.Contains(ids, e.Leases[i].ID) {
			e.Leases[i].Until = until
		}
	}
}

// ExpiredLeases returns the IDs of e's open leases whose deadline has passed
// at now: their owners stopped renewing them, so any transaction on e may
// fold them.
func (e *Entitlement) ExpiredLeases(now time.Time) []string {
	var ids []string
	for _, o := range e.Leases {
		if !o.Until.IsZero() && !now.Before(o.Until) {
			ids = append(ids, o.ID)
		}
	}
	return ids
}

// Fold closes the open lease l of e: what it spent is taken from the settled
// balance (a quota lease of an earlier period spent that period's units,
// which are not taken from this one) and its reservation ends. It reports
// false, changing nothing, when e holds no such open lease.
func (e *Entitlement) Fold(l *Lease) bool {
	i := slices.IndexFunc(e.Leases, func(o OpenLease) bool { return o.ID == l.ID })
	if i < 0 || l.Closed {
		return false
	}
	e.Leases = slices.Delete(e.Leases, i, i+1)
	if e.Type != TypeQuota || l.Period.Equal(e.Quota.ResetAt) {
		e.addSettled(-l.Spent)
	}
	l.Closed = true
	return true
}

// Gather folds every open lease of e; leases holds their documents (it must
// hold every one e registers). It reports false, folding nothing, if one is
// missing: a corrupt registry.
func (e *Entitlement) Gather(leases []*Lease) bool {
	for _, o := range e.Leases {
		if !slices.ContainsFunc(leases, func(l *Lease) bool { return l.ID == o.ID && !l.Closed }) {
			return false
		}
	}
	for _, l := range leases {
		e.Fold(l)
	}
	return true
}

// NeedsGather reports whether a transaction on e at now must fold every
// lease before it charges demand (the sum of the direct charges and holds it
// is about to make): when e has leases and demand does not fit in what is
// free before the next boundary with a unit to spare (the charge could be
// the last, cross a low-balance threshold, or fit only with the leases'
// unspent part; after the gather it sees the exact balance), when a spend
// limit was set meanwhile, or when a new quota period starts (a period
// starts with no leases).
func (e *Entitlement) NeedsGather(now time.Time, demand int64) bool {
	if len(e.Leases) == 0 {
		return false
	}
	if e.Type == TypeQuota && !now.Before(e.Quota.ResetAt) || e.Limits.Spend.Period != "" {
		return true
	}
	return demand >= e.unleased(now)
}

// Exact shows e as if every lease in leases (the documents of e's open
// leases, read with e) were folded: the balance or remaining quota is what is
// really left. It is the view every read returns.
func (e *Entitlement) Exact(leases []Lease) {
	for i := range leases {
		l := leases[i]
		e.Fold(&l)
	}
	e.Leases = nil
}

// ChargeLease charges r to the lease l of e at now, where e is the
// entitlement as its lease's lane knows it (its status, scope, type, expiry,
// currency and per-call limits; its balance is not used). It checks what
// Consume checks but what is available, which is l's: a denial is one of those reasons. fits is
// false, with nothing charged, when r needs more than l has left or l's
// period is over: the call must then be charged on the entitlement itself.
func (e *Entitlement) ChargeLease(now time.Time, l *Lease, r *ConsumeRequest, id, fingerprint string) (c Consumption, reason Reason, fits bool) {
	switch {
	case e.Status == StatusRevoked:
		return Consumption{}, ReasonRevoked, true
	case e.Expired(now):
		return Consumption{}, ReasonExpired, true
	case !e.Scope.Covers(r.Service, r.Tool):
		return Consumption{}, ReasonScopeMismatch, true
	}
	var amount int64
	switch e.Type {
	case TypeCredits:
		if r.Cost == nil {
			return Consumption{}, ReasonCostRequired, true
		}
		if r.Cost.Currency != e.Credits.Balance.Currency {
			return Consumption{}, ReasonCurrencyMismatch, true
		}
		amount = r.Cost.Cents
	case TypeQuota:
		if !now.Before(l.Period) {
			return Consumption{}, "", false
		}
		amount = units(r)
	default:
		return Consumption{}, "", false
	}
	if reason := e.CheckPerCall(r); reason != "" {
		return Consumption{}, reason, true
	}
	if l.Closed || amount > l.Left() {
		return Consumption{}, "", false
	}
	l.Spent += amount
	c = e.consumption(now, r, id, fingerprint)
	// An estimate, at least 1: the lease never holds the last unit.
	after := l.Base + l.Left()
	switch e.Type {
	case TypeCredits:
		c.Cost = *r.Cost
		c.BalanceAfter = e.Credits.Balance
		c.BalanceAfter.Cents = after
	case TypeQuota:
		c.RemainingAfter = &after
	}
	return c, "", true
}
