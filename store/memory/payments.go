package memory

import (
	"context"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// CreatePayment stores p as a new pending payment, unless its idempotency
// key was used: then the earlier payment (same fingerprint) or a Conflict.
func (s *Store) CreatePayment(_ context.Context, p payment.Payment) (store.CreatePaymentResult, error) {
	if err := p.Validate(); err != nil {
		return store.CreatePaymentResult{}, store.Wrap(store.CodeInvalid, err, "payment")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.createPayment(p)
}

// createPayment is CreatePayment of a valid p. Callers hold s.mu.
func (s *Store) createPayment(p payment.Payment) (store.CreatePaymentResult, error) {
	if id, ok := s.byPayKey[p.IdempotencyKey]; ok {
		prior := s.payments[id]
		if prior.Fingerprint != p.Fingerprint {
			return store.CreatePaymentResult{}, store.Errorf(store.CodeConflict, "payment idempotency key reused with different parameters")
		}
		return store.CreatePaymentResult{Payment: copyPayment(prior)}, nil
	}
	if p.ID == "" {
		p.ID = uuid.NewString()
	} else if _, ok := s.payments[p.ID]; ok {
		return store.CreatePaymentResult{}, store.Errorf(store.CodeConflict, "payment %q exists", p.ID)
	}
	if p.ProviderIntentID != "" {
		if _, ok := s.byIntent[p.ProviderIntentID]; ok {
			return store.CreatePaymentResult{}, store.Errorf(store.CodeConflict, "providerIntentId: already linked to another payment")
		}
	}
	now := s.clock()
	p.Status = payment.StatusPending
	p.CreatedAt, p.UpdatedAt = now, now
	p.SucceededAt, p.FailedAt, p.RefundedAt = nil, nil, nil
	p.FailureReason, p.ReceiptID, p.RefundReceiptID, p.EntitlementIDs = "", "", "", nil
	stored := copyPayment(&p)
	stored.Grant.ValidUntil = utcPtr(stored.Grant.ValidUntil)
	stored.Grant.ExpiresAt = utcPtr(stored.Grant.ExpiresAt)
	if stored.Checkout != nil {
		stored.Checkout.ExpiresAt = stored.Checkout.ExpiresAt.UTC()
	}
	s.payments[p.ID] = &stored
	s.byPayKey[p.IdempotencyKey] = p.ID
	if p.ProviderIntentID != "" {
		s.byIntent[p.ProviderIntentID] = p.ID
	}
	return store.CreatePaymentResult{Payment: copyPayment(&stored), Created: true}, nil
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
