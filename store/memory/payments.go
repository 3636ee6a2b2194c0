package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/payment"
)

// GetPayment returns the payment, or ErrNotFound.
func (s *Store) GetPayment(_ context.Context, id string) (payment.Payment, error) {
	return read(s, func(t *tx) (payment.Payment, error) { return t.Payment(id) })
}

// FindPaymentByIdempotencyKey returns the payment created with key, or ErrNotFound.
func (s *Store) FindPaymentByIdempotencyKey(_ context.Context, key string) (payment.Payment, error) {
	return read(s, func(t *tx) (payment.Payment, error) { return t.PaymentByKey(key) })
}

// FindPaymentByProviderIntentID returns the payment linked to intentID, or ErrNotFound.
func (s *Store) FindPaymentByProviderIntentID(_ context.Context, intentID string) (payment.Payment, error) {
	return read(s, func(t *tx) (payment.Payment, error) { return t.PaymentByIntent(intentID) })
}
