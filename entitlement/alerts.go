package entitlement

import (
	"fmt"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// MaxAlerts bounds the low-balance alerts of one entitlement.
const MaxAlerts = 10

// Alert is a low-balance threshold on an entitlement: what is left (the
// balance of credits, the remaining units of a quota; holds do not count)
// is low once it is at or below the threshold. Exactly one of Amount
// (credits), Percent (of what was granted: Granted for credits, Limit for a
// quota) and Units (quota) sets it.
//
// An alert is armed until a charge or capture takes what is left from above
// its threshold to at or below it: that charge triggers it, and the store
// writes one entitlement.balance_low event in the same transaction
// (Consumption.LowBalance). A triggered alert fires no more until a refund,
// a quota reset or a top-up lifts what is left above its threshold again,
// which arms it again. An alert set while what is left is already at or
// below its threshold starts triggered, with no event: nothing crossed it.
// The rules never change an alert in place; they replace e.Alerts.
type Alert struct {
	Amount  *money.Money `json:"amount,omitempty"`
	Percent *int64       `json:"percent,omitempty"`
	Units   *int64       `json:"units,omitempty"`
	// Triggered is true from the charge that crossed the threshold
	// (at TriggeredAt) until what is left is above it again.
	Triggered   bool       `json:"triggered"`
	TriggeredAt *time.Time `json:"triggeredAt,omitempty"`
}

// left is what e has left for its alerts: the balance or remaining units.
func (e *Entitlement) left() int64 {
	if e.Type == TypeQuota {
		return e.Quota.Remaining
	}
	return e.Credits.Balance.Cents
}

// threshold is a's threshold in e's terms. For a percentage it is rounded
// down, which for whole cents or units is exactly "at or below the
// percentage".
func (e *Entitlement) threshold(a *Alert) int64 {
	switch {
	case a.Amount != nil:
		return a.Amount.Cents
	case a.Units != nil:
		return *a.Units
	case a.Percent != nil:
		granted := e.Quota.Limit
		if e.Type == TypeCredits {
			granted = e.Credits.Granted.Cents
		}
		return granted * *a.Percent / 100 // granted ≤ 2^53, so no overflow
	}
	return -1
}

// settleAlerts brings e's alerts in line with what is left at now: a
// triggered alert above its threshold is armed again, and, when trigger is
// set (a charge), an armed one at or below it is triggered. It reports
// whether it triggered any, and whether it changed any.
func (e *Entitlement) settleAlerts(now time.Time, trigger bool) (crossed, changed bool) {
	left := e.left()
	var next []Alert
	for i := range e.Alerts {
		a := &e.Alerts[i]
		low := left <= e.threshold(a)
		if a.Triggered == low || (low && !trigger) {
			continue
		}
		if next == nil {
			next = slices.Clone(e.Alerts)
		}
		b := &next[i]
		b.Triggered, b.TriggeredAt = low, nil
		if low {
			t := now
			b.TriggeredAt = &t
			crossed = true
		}
	}
	if next != nil {
		e.Alerts = next
	}
	return crossed, next != nil
}

// validateAlerts checks e's alerts against its type and currency. Errors
// are *field.Error values naming alerts[i].
func (e *Entitlement) validateAlerts() error {
	if len(e.Alerts) > MaxAlerts {
		return &field.Error{Field: "alerts", Reason: fmt.Sprintf("must have at most %d entries", MaxAlerts)}
	}
	if len(e.Alerts) > 0 && e.Type == TypeSubscription {
		return &field.Error{Field: "alerts", Reason: "a subscription has no balance to alert on"}
	}
	for i := range e.Alerts {
		if err := e.validateAlert(&e.Alerts[i]); err != nil {
			return field.Within(fmt.Sprintf("alerts[%d]", i), err)
		}
	}
	return nil
}

func (e *Entitlement) validateAlert(a *Alert) error {
	set := 0
	for _, p := range []bool{a.Amount != nil, a.Percent != nil, a.Units != nil} {
		if p {
			set++
		}
	}
	if set != 1 {
		return &field.Error{Reason: "must set exactly one of amount, percent and units"}
	}
	switch {
	case a.Amount != nil:
		if e.Type != TypeCredits {
			return &field.Error{Field: "amount", Reason: "is only for credits (a quota alerts on units)"}
		}
		if err := moneyField("amount", *a.Amount); err != nil {
			return err
		}
		if a.Amount.Currency != e.Credits.Balance.Currency {
			return &field.Error{Field: "amount.currency", Reason: fmt.Sprintf("must be %s, the currency of the entitlement", e.Credits.Balance.Currency)}
		}
		if a.Amount.Cents < 0 {
			return &field.Error{Field: "amount.cents", Reason: "must not be negative"}
		}
	case a.Units != nil:
		if e.Type != TypeQuota {
			return &field.Error{Field: "units", Reason: "is only for quotas (credits alert on an amount)"}
		}
		if *a.Units < 0 || *a.Units > money.MaxCents {
			return &field.Error{Field: "units", Reason: fmt.Sprintf("must be between 0 and %d", int64(money.MaxCents))}
		}
	case a.Percent != nil:
		if *a.Percent < 1 || *a.Percent > 100 {
			return &field.Error{Field: "percent", Reason: "must be between 1 and 100"}
		}
	}
	if a.Triggered != (a.TriggeredAt != nil) {
		return &field.Error{Field: "triggeredAt", Reason: "must be set exactly when triggered"}
	}
	return nil
}
