package entitlement

import (
	"cmp"
	"slices"
)

// typeRank orders kinds for candidate selection: a subscription costs nothing
// extra to use, a quota renews, credits are spent for good.
func typeRank(t Type) int {
	switch t {
	case TypeSubscription:
		return 0
	case TypeQuota:
		return 1
	}
	return 2
}

// SortCandidates orders es in the order they should be tried: subscriptions,
// then quotas, then credits; within a kind the earliest expiry first (no
// expiry last), then the oldest, then by ID so the order is total.
func SortCandidates(es []Entitlement) {
	slices.SortFunc(es, func(a, b Entitlement) int {
		if c := cmp.Compare(typeRank(a.Type), typeRank(b.Type)); c != 0 {
			return c
		}
		ae, be := a.EffectiveExpiry(), b.EffectiveExpiry()
		switch {
		case ae.IsZero() && !be.IsZero():
			return 1
		case !ae.IsZero() && be.IsZero():
			return -1
		}
		if c := ae.Compare(be); c != 0 {
			return c
		}
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}
