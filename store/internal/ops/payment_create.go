package ops

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// CreatePayment is store.EntitlementStore.CreatePayment: a payment with
// p's idempotency key answers the call (or is a Conflict); otherwise p is
// created pending.
func (o Shared) CreatePayment(ctx context.Context, p payment.Payment) (store.CreatePaymentResult, error) {
	if err := p.Validate(); err != nil {
		return store.CreatePaymentResult{}, store.Wrap(store.CodeInvalid, err, "payment")
	}
	var out store.CreatePaymentResult
	err := o.run(ctx, "create payment", func(tx unit.Tx) error {
		got, err := tx.PaymentByKey(p.IdempotencyKey)
		fresh := false
		if errors.Is(err, store.ErrNotFound) {
			got, fresh, err = createPayment(tx, p)
		}
		if err == nil && !fresh && got.Fingerprint != p.Fingerprint {
			err = store.Errorf(store.CodeConflict, "payment idempotency key reused with different parameters")
		}
		out = store.CreatePaymentResult{Payment: got, Created: fresh}
		return err
	})
	return out, err
}

// createPayment creates p, whose idempotency key is unused, pending: a
// Conflict when its ID exists or its provider intent is linked to another
// payment. When the payment holding the ID or intent has p's key, a
// concurrent call with that key committed between this unit's reads (on
// PostgreSQL each statement reads its own snapshot): that payment is the
// answer, with fresh false.
func createPayment(tx unit.Tx, p payment.Payment) (out payment.Payment, fresh bool, err error) {
	taken := func(q payment.Payment, err error) (bool, error) {
		switch {
		case errors.Is(err, store.ErrNotFound):
			return false, nil
		case err != nil:
			return false, err
		case q.IdempotencyKey == p.IdempotencyKey:
			out = q
		}
		return true, nil
	}
	if p.ID == "" {
		p.ID = uuid.NewString()
	} else if t, err := taken(tx.Payment(p.ID)); err != nil || t {
		if err == nil && out.ID == "" {
			err = store.Errorf(store.CodeConflict, "payment %q exists", p.ID)
		}
		return out, false, err
	}
	if p.ProviderIntentID != "" {
		if t, err := taken(tx.PaymentByIntent(p.ProviderIntentID)); err != nil || t {
			if err == nil && out.ID == "" {
				err = store.Errorf(store.CodeConflict, "providerIntentId: already linked to another payment")
			}
			return out, false, err
		}
	}
	p = p.Pending(tx.Now())
	p = p.Clone()
	p.CreatedAt, p.UpdatedAt = tx.Instant(p.CreatedAt), tx.Instant(p.UpdatedAt)
	p.Grant.ValidUntil, p.Grant.ExpiresAt = instant(tx, p.Grant.ValidUntil), instant(tx, p.Grant.ExpiresAt)
	if p.Checkout != nil {
		p.Checkout.ExpiresAt = tx.Instant(p.Checkout.ExpiresAt)
	}
	tx.CreatePayment(p)
	return p, true, nil
}

// found is the error of a read, err, that was to find nothing and did not
// answer NotFound: for a document it found (err nil), an error of code
// with the message format; otherwise err.
func found(err error, code store.Code, format string, args ...any) error {
	if err == nil {
		return store.Errorf(code, format, args...)
	}
	return err
}

// LinkProviderIntent is store.ProviderPayments.LinkProviderIntent.
func (o Shared) LinkProviderIntent(ctx context.Context, id, intentID string) (payment.Payment, error) {
	if intentID == "" {
		return payment.Payment{}, store.Errorf(store.CodeInvalid, "intentId: required")
	}
	var out payment.Payment
	err := o.run(ctx, "link payment intent", func(tx unit.Tx) error {
		p, err := tx.Payment(id)
		if err != nil {
			return err
		}
		other, err := tx.PaymentByIntent(intentID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		out = p
		if err := checkLink(&p, intentID, err == nil && other.ID != id); err != nil || p.ProviderIntentID == intentID {
			return err
		}
		p.ProviderIntentID, p.UpdatedAt = intentID, tx.Now()
		tx.PutPayment(p)
		out = p
		return nil
	})
	return out, err
}

// checkLink refuses to link p to intentID (LinkProviderIntent) when p is
// linked to another intent or intentID is linked to another payment
// (takenElsewhere). Linking p to its own intent again is no error.
func checkLink(p *payment.Payment, intentID string, takenElsewhere bool) error {
	switch {
	case p.ProviderIntentID != "" && p.ProviderIntentID != intentID:
		return store.Errorf(store.CodeConflict, "payment %q is linked to another provider intent", p.ID)
	case takenElsewhere:
		return store.Errorf(store.CodeConflict, "providerIntentId: already linked to another payment")
	}
	return nil
}

// instant is tx.Instant of an optional instant.
func instant(tx unit.Tx, t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := tx.Instant(*t)
	return &u
}
