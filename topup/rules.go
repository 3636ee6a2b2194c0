package topup

import (
	"fmt"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// Validate checks the rules of s that need no provider: a positive amount,
// a threshold and a daily cap in its currency, a cap of at least one
// amount, and a scope with a service. The error is a *field.Error.
func (s *Settings) Validate() error {
	cur := s.Amount.Currency
	switch {
	case s.Amount.Validate() != nil:
		return &field.Error{Field: "amount", Reason: s.Amount.Validate().Error()}
	case s.Amount.Cents <= 0:
		return &field.Error{Field: "amount.cents", Reason: "must be positive"}
	case s.Threshold.Currency != cur:
		return &field.Error{Field: "threshold.currency", Reason: "must be the amount's currency (" + cur + ")"}
	case s.Threshold.Cents <= 0:
		return &field.Error{Field: "threshold.cents", Reason: "must be positive"}
	case s.DailyCap.Currency != cur:
		return &field.Error{Field: "dailyCap.currency", Reason: "must be the amount's currency (" + cur + ")"}
	case s.DailyCap.Cents < s.Amount.Cents:
		return &field.Error{Field: "dailyCap.cents", Reason: fmt.Sprintf("must be at least the amount (%d)", s.Amount.Cents)}
	case s.Scope.Service == "":
		return &field.Error{Field: "scope.service", Reason: "is required"}
	}
	return nil
}

// day is the UTC day of t, as TopUp.Day holds it.
func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// Set makes s the settings of t and enables top-up, which forgets earlier
// failures. Without a saved method it is ErrNoMethod.
func Set(t *TopUp, s Settings, now time.Time) error {
	if t.Method == nil {
		return ErrNoMethod
	}
	t.Settings = &s
	t.Enabled, t.DisabledReason, t.Failures, t.UpdatedAt = true, "", 0, now.UTC()
	return nil
}

// Disable disables top-up of t with reason; a pending top-up still ends as
// its payment does.
func Disable(t *TopUp, reason string, now time.Time) {
	t.Enabled, t.DisabledReason, t.UpdatedAt = false, reason, now.UTC()
}

// Failure is the data of a topup.failed event: the failed top-up's
// payment, why it failed, the failures in a row, and whether top-up is now
// disabled.
type Failure struct {
	AgentID             string      `json:"agentId"`
	PaymentID           string      `json:"paymentId"`
	Amount              money.Money `json:"amount"`
	Reason              string      `json:"reason,omitempty"`
	ConsecutiveFailures int         `json:"consecutiveFailures"`
	Disabled            bool        `json:"disabled"`
}

// Settle ends the pending top-up of t by its payment p (read in the same
// transaction), when p has ended: a success forgets earlier failures; a
// failure counts one, gives its amount back to the day's total and, the
// MaxFailures-th in a row, disables top-up; the answer is then the data of
// its topup.failed event. changed says whether t changed. A pending p, or
// none pending, changes nothing.
func Settle(t *TopUp, p *payment.Payment, now time.Time) (f *Failure, changed bool) {
	if t.PendingPaymentID == "" || p == nil || p.ID != t.PendingPaymentID || p.Status == payment.StatusPending {
		return nil, false
	}
	t.PendingPaymentID, t.UpdatedAt = "", now.UTC()
	if p.Status != payment.StatusFailed {
		t.Failures = 0
		return nil, true
	}
	t.Failures++
	if t.Day == day(p.CreatedAt) && t.DayTotal.Currency == p.Amount.Currency {
		t.DayTotal.Cents = max(0, t.DayTotal.Cents-p.Amount.Cents)
	}
	f = &Failure{AgentID: t.AgentID, PaymentID: p.ID, Amount: p.Amount, Reason: p.FailureReason, ConsecutiveFailures: t.Failures}
	if t.Failures >= MaxFailures && t.Enabled {
		Disable(t, fmt.Sprintf("%d top-ups in a row failed (the last: %s)", t.Failures, p.FailureReason), now)
		f.Disabled = true
	}
	return f, true
}

// Begin begins top-up expectSeq+1 of t, whose pending payment (if any) is
// pending, read in the same transaction: it settles that payment first
// (failure is then the data of a topup.failed event to write), refuses
// with ErrDisabled, ErrMoved (t.Seq is not expectSeq), ErrPending,
// ErrPaused (before ResumeAt, after a failure) or ErrDailyCap, and otherwise counts the top-up in t and returns its
// payment, to create in the same transaction.
func Begin(t *TopUp, expectSeq int64, pending *payment.Payment, now time.Time) (p payment.Payment, failure *Failure, err error) {
	failure, _ = Settle(t, pending, now)
	switch {
	case t.Seq != expectSeq:
		return p, failure, ErrMoved
	case t.PendingPaymentID != "":
		return p, failure, ErrPending
	case !t.Enabled || t.Settings == nil || t.Method == nil:
		return p, failure, ErrDisabled
	case now.Before(t.ResumeAt()):
		return p, failure, ErrPaused
	}
	s := t.Settings
	today := day(now)
	total := s.Amount.Cents
	if t.Day == today && t.DayTotal.Currency == s.Amount.Currency {
		total += t.DayTotal.Cents
	}
	if total > s.DailyCap.Cents {
		return p, failure, ErrDailyCap
	}
	now = now.UTC()
	t.Seq++
	t.Day, t.DayTotal = today, money.Money{Cents: total, Currency: s.Amount.Currency}
	t.UpdatedAt = now
	p = payment.Payment{
		ID:          PaymentID(t.AgentID, t.Seq),
		AgentID:     t.AgentID,
		Amount:      s.Amount,
		Provider:    payment.ProviderStripe,
		Description: "Auto top-up",
		Grant: payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{
			Service: s.Scope.Service, Tools: append([]string(nil), s.Scope.Tools...)}},
		Status:         payment.StatusPending,
		CreatedAt:      now,
		UpdatedAt:      now,
		IdempotencyKey: PaymentKey(t.AgentID, t.Seq),
		Fingerprint:    "topup",
	}
	t.PendingPaymentID = p.ID
	return p, failure, nil
}
