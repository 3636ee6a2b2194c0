package store

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/payment"
)

// PendingFilter selects the payments ListPendingPayments answers: pending
// payments of Provider created at or before CreatedBefore.
type PendingFilter struct {
	Provider      payment.Provider
	CreatedBefore time.Time
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
}
