package payment

import (
	"fmt"
	"time"

	"github.com/stipend-mcp/stipend/money"
)

// The state changes of a payment. Each is pure: the store reads the
// payment, asks Toward (or the check of the change) whether it applies,
// and writes what the method returns, with the instant of the change.

// ChangeError is the error of a change a payment does not take: Refused
// when its status does not allow it (a Conflict in the store), otherwise
// bad input (Invalid).
type ChangeError struct {
	Refused bool
	Message string
}

func (e *ChangeError) Error() string { return e.Message }

func refused(format string, args ...any) error {
	return &ChangeError{Refused: true, Message: fmt.Sprintf(format, args...)}
}

// Refused is the error of a move of p to status to that Toward refuses.
func Refused(p *Payment, to Status) error {
	return refused("payment %q is %s: it cannot become %s", p.ID, p.Status, to)
}

// Succeeded returns p succeeded at now, with its receipt and the
// entitlements its grant created.
func (p Payment) Succeeded(now time.Time, receiptID string, entitlementIDs []string) Payment {
	p.Status, p.SucceededAt, p.UpdatedAt = StatusSucceeded, &now, now
	p.ReceiptID, p.EntitlementIDs = receiptID, entitlementIDs
	return p
}

// Failed returns p failed at now for reason.
func (p Payment) Failed(now time.Time, reason string) Payment {
	p.Status, p.FailedAt, p.UpdatedAt, p.FailureReason = StatusFailed, &now, now, reason
	return p
}

// Refunded returns p refunded in full at now, with its refund receipt.
func (p Payment) Refunded(now time.Time, receiptID string) Payment {
	p.Status, p.RefundedAt, p.UpdatedAt, p.RefundReceiptID = StatusRefunded, &now, now, receiptID
	return p
}

// Remaining is what a full refund of p gives back: its amount less what
// partial refunds gave back already.
func (p *Payment) Remaining() money.Money {
	m := p.Amount
	if p.RefundedAmount != nil {
		m.Cents -= p.RefundedAmount.Cents
	}
	return m
}

// RefundPart checks a partial refund of p that brings what was refunded to
// total and returns the part refunded now. replay is true when total adds
// nothing to what earlier refunds recorded (a repeated or overtaken
// provider event) or p was refunded in full. A pending or failed payment is
// refused (ChangeError); a total in another currency, not positive or not
// below the payment's amount is bad input (a ChangeError that is not Refused).
func (p *Payment) RefundPart(total money.Money) (part money.Money, replay bool, err error) {
	switch {
	case p.Status == StatusRefunded:
		return money.Money{}, true, nil
	case p.Status != StatusSucceeded:
		return money.Money{}, false, Refused(p, StatusRefunded)
	case total.Currency != p.Amount.Currency:
		return money.Money{}, false, &ChangeError{Message: fmt.Sprintf("refunded: currency %s, the payment is in %s", total.Currency, p.Amount.Currency)}
	case total.Cents <= 0 || total.Cents >= p.Amount.Cents:
		return money.Money{}, false, &ChangeError{Message: "refunded: must be positive and below the payment's amount (a full refund is RefundPayment)"}
	}
	var before int64
	if p.RefundedAmount != nil {
		before = p.RefundedAmount.Cents
	}
	if total.Cents <= before {
		return money.Money{}, true, nil
	}
	return money.Money{Cents: total.Cents - before, Currency: total.Currency}, false, nil
}

// PartlyRefunded returns p with total refunded so far, at now.
func (p Payment) PartlyRefunded(now time.Time, total money.Money) Payment {
	p.RefundedAmount, p.UpdatedAt = &total, now
	return p
}

// CheckDispute says what a dispute does to p: replay when p was disputed
// or refunded already (nothing is left to revoke); refused (ChangeError)
// for a pending or failed payment.
func (p *Payment) CheckDispute() (replay bool, err error) {
	switch {
	case p.DisputedAt != nil, p.Status == StatusRefunded:
		return true, nil
	case p.Status != StatusSucceeded:
		return false, refused("payment %q is %s: only a succeeded payment can be disputed", p.ID, p.Status)
	}
	return false, nil
}

// CheckDisputeWon says what winning its dispute does to p: replay when it
// was won already; refused (ChangeError) for a payment never disputed.
func (p *Payment) CheckDisputeWon() (replay bool, err error) {
	switch {
	case p.DisputeWonAt != nil:
		return true, nil
	case p.DisputedAt == nil:
		return false, refused("payment %q was not disputed", p.ID)
	}
	return false, nil
}

// DisputeWon returns p with its dispute won at now.
func (p Payment) DisputeWon(now time.Time) Payment {
	p.DisputeWonAt, p.UpdatedAt = &now, now
	return p
}

// Disputed returns p disputed at now for reason.
func (p Payment) Disputed(now time.Time, reason string) Payment {
	p.DisputedAt, p.DisputeReason, p.UpdatedAt = &now, reason, now
	return p
}
