package entitlement

import (
	"maps"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// Set is the new value of one part of an entitlement in an Update.
type Set[T any] struct{ To T }

// Update changes what an admin may change on an entitlement once granted:
// its spend controls, alerts, metadata and expiry. A nil field leaves that
// part as it is; a Set replaces it (a Set of nil removes it).
type Update struct {
	MaxPerCall      *Set[*money.Money]
	MaxUnitsPerCall *Set[*int64]
	// SpendLimit gives the period and the most (Max or MaxUnits); its
	// other fields are ignored. The zero value removes the limit.
	SpendLimit *Set[SpendLimit]
	// Alerts replaces every alert; their Triggered fields are ignored.
	Alerts    *Set[[]Alert]
	Metadata  *Set[map[string]string]
	ExpiresAt *Set[*time.Time]
}

// Apply makes u on e at now. The spend of the current period is kept while
// the period stays the same (a new Max applies from now on, to what was
// spent already); a new period, or a limit where there was none, starts a
// period at now with nothing spent. New alerts start armed, or triggered
// (with no event) when what is left is already at or below them. Errors are
// *field.Error values naming the field (limits.maxPerCall.currency,
// alerts[1].percent, …); on error e is unchanged.
func (e *Entitlement) Apply(u Update, now time.Time) error {
	next := e.Clone()
	next.Refresh(now)
	if u.MaxPerCall != nil {
		next.Limits.MaxPerCall = ClonePtr(u.MaxPerCall.To)
	}
	if u.MaxUnitsPerCall != nil {
		next.Limits.MaxUnitsPerCall = ClonePtr(u.MaxUnitsPerCall.To)
	}
	if u.SpendLimit != nil {
		next.Limits.Spend = next.spendLimit(u.SpendLimit.To, now)
	}
	if u.Alerts != nil {
		next.Alerts = make([]Alert, len(u.Alerts.To))
		for i, a := range u.Alerts.To {
			next.Alerts[i] = Alert{Amount: ClonePtr(a.Amount), Percent: ClonePtr(a.Percent), Units: ClonePtr(a.Units)}
		}
		if len(next.Alerts) == 0 {
			next.Alerts = nil
		}
	}
	if u.Metadata != nil {
		next.Metadata = maps.Clone(u.Metadata.To)
		if len(next.Metadata) == 0 {
			next.Metadata = nil
		}
	}
	if u.ExpiresAt != nil {
		next.ExpiresAt = ClonePtr(u.ExpiresAt.To)
		if next.ExpiresAt != nil {
			*next.ExpiresAt = next.ExpiresAt.UTC()
		}
	}
	if err := next.Validate(); err != nil {
		return err
	}
	if next.ExpiresAt != nil && u.ExpiresAt != nil && !next.ExpiresAt.After(now) {
		return &field.Error{Field: "expiresAt", Reason: "must be later than now (" + now.Format(time.RFC3339) + "); revoke the entitlement to end it now"}
	}
	if u.Alerts != nil {
		next.settleAlerts(now, true) // the starting states of new alerts: nothing crossed them
	}
	*e = next
	return nil
}

// spendLimit is the limit want as it applies to e at now (see Apply).
func (e *Entitlement) spendLimit(want SpendLimit, now time.Time) SpendLimit {
	out := e.Limits.Spend.replaced(want, now)
	if e.Type == TypeCredits {
		out.Spent.Currency = out.Max.Currency
	}
	return out
}

// replaced is the limit want (its period and most) as it replaces s at now:
// the spend counted so far and the period's bounds are kept when the period
// is the same, and a new period starts at now otherwise.
func (s SpendLimit) replaced(want SpendLimit, now time.Time) SpendLimit {
	if want.Period == "" && want.Max.IsZero() && want.MaxUnits == 0 {
		return SpendLimit{}
	}
	out := SpendLimit{Period: want.Period, Max: want.Max, MaxUnits: want.MaxUnits}
	if s.Period != "" && s.Period == want.Period && s.Max.Currency == want.Max.Currency {
		out.Spent, out.SpentUnits, out.ResetAt, out.Anchor = s.Spent, s.SpentUnits, s.ResetAt, s.Anchor
	} else {
		out.Anchor = now.UTC()
		if want.Period.Valid() {
			out.ResetAt = want.Period.NextBoundary(out.Anchor, out.Anchor)
		}
	}
	return out
}

// ClonePtr returns a copy of *p, or nil: what a Clone uses so that the copy
// shares no pointer with the original.
func ClonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// cloneControls makes dst share no pointer or slice of src's limits and
// alerts.
func cloneControls(dst, src *Entitlement) {
	dst.Limits.MaxPerCall = ClonePtr(src.Limits.MaxPerCall)
	dst.Limits.MaxUnitsPerCall = ClonePtr(src.Limits.MaxUnitsPerCall)
	dst.Alerts = slices.Clone(src.Alerts)
	for i := range dst.Alerts {
		a := &dst.Alerts[i]
		a.Amount, a.Percent, a.Units, a.TriggeredAt = ClonePtr(a.Amount), ClonePtr(a.Percent), ClonePtr(a.Units), ClonePtr(a.TriggeredAt)
	}
}
