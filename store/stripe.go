package store

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// PendingFilter selects the payments ListPendingPayments answers: pending
// payments of Provider created at or before CreatedBefore.
type PendingFilter struct {
	Provider      payment.Provider
	CreatedBefore time.Time
}

// Validate checks f for ListPendingPayments: a known provider and a
// CreatedBefore (Invalid otherwise).
func (f PendingFilter) Validate() error {
	switch {
	case !f.Provider.Valid():
		return Errorf(CodeInvalid, "provider: %q is not a payment provider", f.Provider)
	case f.CreatedBefore.IsZero():
		return Errorf(CodeInvalid, "createdBefore: required")
	}
	return nil
}

// ProviderPayments is what payments whose provider objects Stipend makes
// itself (Stripe PaymentIntents and Checkout Sessions) need besides the
// payment methods of EntitlementStore. CreatePayment stores a payment's
// Checkout as given.
type ProviderPayments interface {
	// LinkProviderIntent links payment id to the provider intent intentID
	// (a Checkout Session's PaymentIntent, known once the payer pays), so
	// FindPaymentByProviderIntentID finds it, atomically. Linking a payment
	// to the intent it is linked to already returns it unchanged. It is a
	// Conflict when the payment is linked to another intent or intentID to
	// another payment; ErrNotFound when the payment is absent; Invalid for
	// an empty intentID. The payment's status is not changed or checked.
	LinkProviderIntent(ctx context.Context, id, intentID string) (payment.Payment, error)
	// ListPendingPayments lists the payments f selects, oldest first (by
	// CreatedAt, then ID): the work of a reconciliation sweep. A zero
	// f.CreatedBefore or an invalid f.Provider is Invalid.
	ListPendingPayments(ctx context.Context, f PendingFilter, p Page) (items []payment.Payment, nextCursor string, err error)

	// RefundPaymentPart records a partial refund of succeeded payment id
	// that brings what was refunded to total (the provider's running total,
	// such as a Stripe charge's amount_refunded), in ONE atomic step: the
	// part refunded since the last call is taken off what its credits
	// entitlements have available (never below zero, nor below what holds
	// reserve; the rest stays usable; quota and subscription grants are
	// kept), a refund receipt of the part that ch.Sign signs is stored,
	// Payment.RefundedAmount becomes total and a payment.partially_refunded
	// event is written. A total that adds nothing (an event overtaken by a
	// later one), a payment refunded in full, or a ch.Inbound already
	// recorded answer the payment as it is with Replayed true. A pending or
	// failed payment is a Conflict; a total in another currency, not
	// positive or not below the amount is Invalid; ErrNotFound if absent.
	// A full refund after partial ones (RefundPayment) gives back what
	// remains. Under contention it may answer Unavailable; retrying is safe.
	RefundPaymentPart(ctx context.Context, id string, total money.Money, ch PaymentChange) (Completion, error)
	// DisputePayment records that the payer disputed succeeded payment id
	// (ch.Reason says why) and revokes what is left of its grant, in ONE
	// atomic step that writes payment.disputed and an entitlement.revoked
	// event per entitlement it revokes. A payment disputed or refunded
	// already, or a ch.Inbound already recorded, is answered as it is and
	// nothing changes. A pending or failed payment is a Conflict;
	// ErrNotFound if absent. Under contention it may answer Unavailable;
	// retrying is safe.
	DisputePayment(ctx context.Context, id string, ch PaymentChange) (payment.Payment, error)
	// WinDispute records that the dispute of payment id was decided for the
	// seller, and makes what DisputePayment revoked active again, with what
	// it had left then (holds the revocation ended stay ended), writing
	// payment.dispute_won and an entitlement.granted each, in one
	// transaction. A second call replays; a payment never disputed is a
	// Conflict.
	WinDispute(ctx context.Context, id string, ch PaymentChange) (payment.Payment, error)
}
