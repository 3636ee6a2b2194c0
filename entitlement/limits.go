package entitlement

import (
	"fmt"
	"time"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// Spend controls bound what an entitlement pays for: a most per call, and a
// most per period (hour, day, week, month), both checked in the same
// transaction as the charge or hold they refuse. Amounts are in the
// entitlement's own terms: money of its balance's currency for credits,
// units for a quota. A subscription has no spend to bound.

// The denial reasons of the spend controls.
const (
	// ReasonMaxPerCall: the call (or the hold's maximum) is priced above
	// the entitlement's MaxPerCall or MaxUnitsPerCall, or above the
	// account's.
	ReasonMaxPerCall Reason = "max_per_call_exceeded"
	// ReasonSpendLimit: the call would take the spend of the current period,
	// with what open holds reserve, above the period's limit.
	ReasonSpendLimit Reason = "spend_limit_reached"
)

// Limits are the spend controls of an entitlement. The rules never change
// them in place, so copies of an entitlement may share them.
type Limits struct {
	// MaxPerCall is the most one call may cost (credits only).
	MaxPerCall *money.Money `json:"maxPerCall,omitempty"`
	// MaxUnitsPerCall is the most units one call may use (quota only).
	MaxUnitsPerCall *int64 `json:"maxUnitsPerCall,omitempty"`
	// Spend limits what the entitlement pays per period; its zero value
	// (no Period) is no limit.
	Spend SpendLimit `json:"spendLimit,omitzero"`
}

// SpendLimit is the most an entitlement may pay per Period: Max for credits,
// MaxUnits for a quota. Spent (credits) or SpentUnits (quota) is what
// charges paid since the period began; it starts again at zero lazily, as a
// quota does, once now ≥ ResetAt. Periods are counted from Anchor, the
// moment the limit was set. What open holds reserve counts against the
// limit too, so a capture never takes the spend above it.
type SpendLimit struct {
	Period     Period      `json:"period"`
	Max        money.Money `json:"max,omitzero"`
	MaxUnits   int64       `json:"maxUnits,omitempty"`
	Spent      money.Money `json:"spent,omitzero"`
	SpentUnits int64       `json:"spentUnits,omitempty"`
	ResetAt    time.Time   `json:"resetAt"`
	Anchor     time.Time   `json:"anchor"`
}

// IsZero reports whether l sets no control.
func (l Limits) IsZero() bool {
	return l.MaxPerCall == nil && l.MaxUnitsPerCall == nil && l.Spend.Period == ""
}

// perCallMax is e's most per call in its terms; ok is false without one.
func (e *Entitlement) perCallMax() (int64, bool) {
	switch {
	case e.Type == TypeCredits && e.Limits.MaxPerCall != nil:
		return e.Limits.MaxPerCall.Cents, true
	case e.Type == TypeQuota && e.Limits.MaxUnitsPerCall != nil:
		return *e.Limits.MaxUnitsPerCall, true
	}
	return 0, false
}

// spendRoom is what the current period's limit leaves at now, less what
// open holds reserve; ok is false without a limit. It does not apply the
// lazy reset to e (Refresh does): a period that has ended counts as empty.
func (e *Entitlement) spendRoom(now time.Time) (int64, bool) {
	s := &e.Limits.Spend
	if s.Period == "" || e.Type == TypeSubscription {
		return 0, false
	}
	max := s.MaxUnits
	if e.Type == TypeCredits {
		max = s.Max.Cents
	}
	return max - s.spentAt(now, e.Type) - e.held(), true
}

// CheckPerCall reports ReasonMaxPerCall when r costs more than e allows one
// call, or "". Check applies it; a charge served from elsewhere than the
// entitlement's own document (a lease) must apply it too.
func (e *Entitlement) CheckPerCall(r *ConsumeRequest) Reason {
	if e.Type == TypeCredits && r.Cost == nil {
		return "" // Check refuses it: cost_required
	}
	if max, ok := e.perCallMax(); ok && e.reserve(r) > max {
		return ReasonMaxPerCall
	}
	return ""
}

// checkLimits reports why e's spend controls refuse r at now, or "".
func (e *Entitlement) checkLimits(now time.Time, r *ConsumeRequest) Reason {
	if reason := e.CheckPerCall(r); reason != "" {
		return reason
	}
	if room, ok := e.spendRoom(now); ok && e.reserve(r) > room {
		return ReasonSpendLimit
	}
	return ""
}

// refreshSpend applies the lazy reset of the spend limit at now and
// reports whether it changed anything.
func (e *Entitlement) refreshSpend(now time.Time) bool { return e.Limits.Spend.refresh(now) }

// refresh applies the lazy reset of s at now: once now ≥ ResetAt, the spend
// starts again at zero and ResetAt is the first boundary after now. It
// reports whether it changed anything. An entitlement's limit and a wallet
// member's caps (wallet.go) reset by this one rule.
func (s *SpendLimit) refresh(now time.Time) bool {
	if s.Period == "" || now.Before(s.ResetAt) {
		return false
	}
	s.Spent.Cents, s.SpentUnits = 0, 0
	s.ResetAt = s.Period.NextBoundary(s.Anchor, now)
	return true
}

// spentAt is what s counts as spent at now in t's terms (cents for credits,
// units for a quota): zero once the period has ended, as if refresh had run.
func (s *SpendLimit) spentAt(now time.Time, t Type) int64 {
	if !now.Before(s.ResetAt) {
		return 0
	}
	if t == TypeCredits {
		return s.Spent.Cents
	}
	return s.SpentUnits
}

// addSpend counts n (in e's terms; negative for a refund) toward the current
// period's spend. The caller has applied the lazy reset. A refund never
// takes the spend below zero.
func (e *Entitlement) addSpend(n int64) { e.Limits.Spend.add(e.Type, n) }

// add counts n of a charge to an entitlement of type t (cents for credits,
// units for a quota; negative for a refund) toward the current period's
// spend, never below zero. The caller has applied the lazy reset.
func (s *SpendLimit) add(t Type, n int64) {
	if s.Period == "" {
		return
	}
	switch t {
	case TypeCredits:
		s.Spent.Cents = max(s.Spent.Cents+n, 0)
	case TypeQuota:
		s.SpentUnits = max(s.SpentUnits+n, 0)
	}
}

// inSpendPeriod reports whether t falls in the spend limit's current period.
func (e *Entitlement) inSpendPeriod(t time.Time) bool { return e.Limits.Spend.inPeriod(t) }

// inPeriod reports whether t falls in s's current period.
func (s *SpendLimit) inPeriod(t time.Time) bool {
	return s.Period != "" && s.Period.NextBoundary(s.Anchor, t).Equal(s.ResetAt)
}

// Headroom is the most that can be charged to e at now before a boundary is
// reached: zero available, the spend limit of the current period, or the
// next armed low-balance threshold (a charge that leaves what is left at or
// below it crosses it, so the headroom stops one short). It is what is
// available when nothing else bounds it, and zero for a subscription, which
// has nothing to spend. It changes nothing in e. Per-call limits are not
// part of it: they bound each call, not the total (CheckPerCall).
func (e *Entitlement) Headroom(now time.Time) int64 {
	var left int64
	switch e.Type {
	case TypeCredits:
		left = e.Credits.Balance.Cents
	case TypeQuota:
		left = e.Quota.Remaining
		if !now.Before(e.Quota.ResetAt) {
			left = e.Quota.Limit
		}
	default:
		return 0
	}
	room := left - e.held()
	if r, ok := e.spendRoom(now); ok {
		room = min(room, r)
	}
	for i := range e.Alerts {
		a := &e.Alerts[i]
		t := e.threshold(a)
		if a.Triggered && left <= t {
			continue // not armed: it stays so until lifted above t
		}
		room = min(room, left-t-1)
	}
	return max(room, 0)
}

// validateLimits checks e's spend controls against its type and currency.
// Errors are *field.Error values under "limits".
func (e *Entitlement) validateLimits() error {
	l := &e.Limits
	if e.Type == TypeSubscription && !l.IsZero() {
		return &field.Error{Field: "limits", Reason: "a subscription has no spend to limit"}
	}
	if l.MaxPerCall != nil {
		if e.Type != TypeCredits {
			return &field.Error{Field: "limits.maxPerCall", Reason: "is only for credits (a quota limits maxUnitsPerCall)"}
		}
		if err := e.ownMoney("limits.maxPerCall", *l.MaxPerCall); err != nil {
			return err
		}
	}
	if l.MaxUnitsPerCall != nil {
		if e.Type != TypeQuota {
			return &field.Error{Field: "limits.maxUnitsPerCall", Reason: "is only for quotas (credits limit maxPerCall)"}
		}
		if *l.MaxUnitsPerCall < 1 || *l.MaxUnitsPerCall > MaxUnits {
			return &field.Error{Field: "limits.maxUnitsPerCall", Reason: fmt.Sprintf("must be between 1 and %d", MaxUnits)}
		}
	}
	return e.validateSpend()
}

func (e *Entitlement) validateSpend() error {
	s := &e.Limits.Spend
	if s.Period == "" {
		if *s != (SpendLimit{}) {
			return &field.Error{Field: "limits.spendLimit.period", Reason: "is required"}
		}
		return nil
	}
	if !s.Period.Valid() {
		return &field.Error{Field: "limits.spendLimit.period", Reason: "must be hour, day, week or month"}
	}
	switch e.Type {
	case TypeCredits:
		if s.MaxUnits != 0 {
			return &field.Error{Field: "limits.spendLimit.maxUnits", Reason: "is only for quotas (credits limit max)"}
		}
		if s.Max.IsZero() {
			return &field.Error{Field: "limits.spendLimit.max", Reason: "is required for credits"}
		}
		if err := e.ownMoney("limits.spendLimit.max", s.Max); err != nil {
			return err
		}
		if s.Spent.Cents < 0 || s.Spent.Currency != s.Max.Currency {
			return &field.Error{Field: "limits.spendLimit.spent", Reason: "must be a non-negative amount in the currency of max"}
		}
	case TypeQuota:
		if !s.Max.IsZero() {
			return &field.Error{Field: "limits.spendLimit.max", Reason: "is only for credits (a quota limits maxUnits)"}
		}
		if s.MaxUnits < 1 || s.MaxUnits > money.MaxCents {
			return &field.Error{Field: "limits.spendLimit.maxUnits", Reason: fmt.Sprintf("must be between 1 and %d", int64(money.MaxCents))}
		}
		if s.SpentUnits < 0 {
			return &field.Error{Field: "limits.spendLimit.spentUnits", Reason: "must not be negative"}
		}
	}
	return nil
}

// ownMoney checks that m is a valid, positive amount in e's currency.
func (e *Entitlement) ownMoney(path string, m money.Money) error {
	if err := moneyField(path, m); err != nil {
		return err
	}
	if m.Currency != e.Credits.Balance.Currency {
		return &field.Error{Field: path + ".currency", Reason: fmt.Sprintf("must be %s, the currency of the entitlement", e.Credits.Balance.Currency)}
	}
	if m.Cents < 1 {
		return &field.Error{Field: path + ".cents", Reason: "must be positive"}
	}
	return nil
}
