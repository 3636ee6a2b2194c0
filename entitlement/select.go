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

// compareCandidates is the selection order: subscriptions, then quotas, then
// credits; within a kind the earliest expiry first (no expiry last), then the
// oldest, then by ID so the order is total.
func compareCandidates(a, b *Entitlement) int {
	if c := cmp.Compare(typeRank(a.Type), typeRank(b.Type)); c != 0 {
		return c
	}
	ae, aok := a.EffectiveExpiry()
	be, bok := b.EffectiveExpiry()
	switch {
	case !aok && bok:
		return 1
	case aok && !bok:
		return -1
	}
	if c := ae.Compare(be); c != 0 {
		return c
	}
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// SortCandidates orders es in the order they should be tried (see
// compareCandidates).
func SortCandidates(es []Entitlement) {
	slices.SortFunc(es, func(a, b Entitlement) int { return compareCandidates(&a, &b) })
}

// Candidates appends to dst, in the order they should be tried, the
// entitlements of es whose scope covers service and tool, and returns the
// scope_mismatch denials of the others. It is the one selection rule both
// stores use; the entitlements are not modified.
func Candidates(dst, es []*Entitlement, service, tool string) ([]*Entitlement, []Denial) {
	var denials []Denial
	for _, e := range es {
		if !e.Scope.Covers(service, tool) {
			denials = append(denials, Denial{EntitlementID: e.ID, Reason: ReasonScopeMismatch})
			continue
		}
		dst = append(dst, e)
	}
	slices.SortFunc(dst, compareCandidates)
	return dst, denials
}
