package transition

import (
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// RefundPart checks a partial refund of p that brings what was refunded to
// total (RefundPaymentPart) and returns the part refunded now. replay is
// true when total adds nothing to what earlier calls recorded (a repeated
// or overtaken provider event) or p was refunded in full. A pending or
// failed payment is a Conflict; a total in another currency, not positive
// or not below the payment's amount is Invalid.
func RefundPart(p *payment.Payment, total money.Money) (part money.Money, replay bool, err error) {
	switch {
	case p.Status == payment.StatusRefunded:
		return money.Money{}, true, nil
	case p.Status != payment.StatusSucceeded:
		return money.Money{}, false, RefusedPayment(p.ID, p.Status, payment.StatusRefunded)
	case total.Currency != p.Amount.Currency:
		return money.Money{}, false, store.Errorf(store.CodeInvalid, "refunded: currency %s, the payment is in %s", total.Currency, p.Amount.Currency)
	case total.Cents <= 0 || total.Cents >= p.Amount.Cents:
		return money.Money{}, false, store.Errorf(store.CodeInvalid, "refunded: must be positive and below the payment's amount (a full refund is RefundPayment)")
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

// CutCredits takes up to part off what e, refreshed, has available (its
// balance less what holds reserve), never below zero, and returns what it
// took: zero for an entitlement that is not active credits in part's
// currency. The rest of the grant stays usable.
func CutCredits(e *entitlement.Entitlement, part money.Money) money.Money {
	c := &e.Credits
	if e.Type != entitlement.TypeCredits || e.Status != entitlement.StatusActive || c.Balance.Currency != part.Currency {
		return money.Money{Currency: part.Currency}
	}
	take := min(part.Cents, max(c.Balance.Cents-c.Held.Cents, 0))
	c.Balance.Cents -= take
	return money.Money{Cents: take, Currency: part.Currency}
}

// Remaining is what a full refund of p gives back: its amount less what
// partial refunds gave back already.
func Remaining(p *payment.Payment) money.Money {
	m := p.Amount
	if p.RefundedAmount != nil {
		m.Cents -= p.RefundedAmount.Cents
	}
	return m
}

// CheckDispute says what DisputePayment does to p: replay when p was
// disputed or refunded already (nothing left to revoke); a Conflict for a
// pending or failed payment.
func CheckDispute(p *payment.Payment) (replay bool, err error) {
	switch {
	case p.DisputedAt != nil, p.Status == payment.StatusRefunded:
		return true, nil
	case p.Status != payment.StatusSucceeded:
		return false, store.Errorf(store.CodeConflict, "payment %q is %s: only a succeeded payment can be disputed", p.ID, p.Status)
	}
	return false, nil
}
