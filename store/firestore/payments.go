package firestore

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

func (s *Store) paymentRef(id string) *firestore.DocumentRef {
	return s.col(colPayments).Doc(docID(id))
}

func (s *Store) paymentKeyRef(key string) *firestore.DocumentRef {
	return s.col(colPaymentsIdempotency).Doc(docID(key))
}

// txPayment reads a payment inside tx.
func (s *Store) txPayment(tx *firestore.Transaction, id string) (payment.Payment, error) {
	snap, err := tx.Get(s.paymentRef(id))
	if err != nil {
		if isNotFound(err) {
			return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment %q", id)
		}
		return payment.Payment{}, err
	}
	return paymentFrom(snap)
}

// GetPayment implements store.EntitlementStore.
func (s *Store) GetPayment(ctx context.Context, id string) (payment.Payment, error) {
	snap, err := s.paymentRef(id).Get(ctx)
	if err != nil {
		if isNotFound(err) {
			return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment %q", id)
		}
		return payment.Payment{}, fsfault.Read(err, "get payment")
	}
	return paymentFrom(snap)
}

// FindPaymentByIdempotencyKey implements store.EntitlementStore.
func (s *Store) FindPaymentByIdempotencyKey(ctx context.Context, key string) (payment.Payment, error) {
	snap, err := s.paymentKeyRef(key).Get(ctx)
	if err != nil {
		if isNotFound(err) {
			return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment for idempotency key")
		}
		return payment.Payment{}, fsfault.Read(err, "find payment by idempotency key")
	}
	f := read(snap)
	id := f.str("paymentId")
	if f.err != nil {
		return payment.Payment{}, f.err
	}
	return s.GetPayment(ctx, id)
}

// FindPaymentByProviderIntentID implements store.EntitlementStore.
func (s *Store) FindPaymentByProviderIntentID(ctx context.Context, intentID string) (payment.Payment, error) {
	if intentID == "" {
		return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment for provider intent")
	}
	snaps, err := s.build(qPaymentByIntent, filter{"providerIntentId", "==", intentID}).Limit(1).Documents(ctx).GetAll()
	if err != nil {
		return payment.Payment{}, fsfault.Read(err, "find payment by provider intent")
	}
	if len(snaps) == 0 {
		return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment for provider intent %q", intentID)
	}
	return paymentFrom(snaps[0])
}
