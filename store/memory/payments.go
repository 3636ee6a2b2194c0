package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
)

// CreatePayment implements store.EntitlementStore (ops.CreatePayment).
func (s *Store) CreatePayment(ctx context.Context, p payment.Payment) (store.CreatePaymentResult, error) {
	return ops.CreatePayment(ctx, s.unit, p)
}

// GetPayment returns the payment, or ErrNotFound.
func (s *Store) GetPayment(_ context.Context, id string) (payment.Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.payments[id]
	if p == nil {
		return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment %q", id)
	}
	return copyPayment(p), nil
}

// FindPaymentByIdempotencyKey returns the payment created with key, or ErrNotFound.
func (s *Store) FindPaymentByIdempotencyKey(_ context.Context, key string) (payment.Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.byPayKey[key]
	if !ok {
		return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment with that idempotency key")
	}
	return copyPayment(s.payments[id]), nil
}

// FindPaymentByProviderIntentID returns the payment linked to intentID, or ErrNotFound.
func (s *Store) FindPaymentByProviderIntentID(_ context.Context, intentID string) (payment.Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.byIntent[intentID]
	if !ok {
		return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment with provider intent %q", intentID)
	}
	return copyPayment(s.payments[id]), nil
}
