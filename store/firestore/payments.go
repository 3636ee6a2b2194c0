package firestore

import (
	"context"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

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

// CreatePayment implements store.EntitlementStore. The pointer document
// payments_idempotency/<key> is read first and created with the payment, so
// concurrent calls with one key create one payment.
func (s *Store) CreatePayment(ctx context.Context, p payment.Payment) (store.CreatePaymentResult, error) {
	if err := p.Validate(); err != nil {
		return store.CreatePaymentResult{}, store.Wrap(store.CodeInvalid, err, "payment")
	}
	keyRef := s.paymentKeyRef(p.IdempotencyKey)
	var out store.CreatePaymentResult
	err := s.run(ctx, "create payment", func(ctx context.Context, tx *firestore.Transaction) error {
		now := s.clock()
		ptr, err := tx.Get(keyRef)
		switch {
		case err == nil:
			f := read(ptr)
			id := f.str("paymentId")
			if f.err != nil {
				return f.err
			}
			existing, err := s.txPayment(tx, id)
			if err != nil {
				return err
			}
			if existing.Fingerprint != p.Fingerprint {
				return store.Errorf(store.CodeConflict, "payment idempotency key reused with different parameters")
			}
			out = store.CreatePaymentResult{Payment: existing}
			return nil
		case !isNotFound(err):
			return err
		}
		np := p
		if np.ID == "" {
			np.ID = uuid.NewString()
		}
		ref := s.paymentRef(np.ID)
		if _, err := tx.Get(ref); err == nil {
			return store.Errorf(store.CodeConflict, "payment %q exists", np.ID)
		} else if !isNotFound(err) {
			return err
		}
		if np.ProviderIntentID != "" {
			linked, err := tx.Documents(s.build(qPaymentByIntent, filter{"providerIntentId", "==", np.ProviderIntentID}).Limit(1)).GetAll()
			if err != nil {
				return err
			}
			if len(linked) > 0 {
				return store.Errorf(store.CodeConflict, "providerIntentId: already linked to another payment")
			}
		}
		np.Status, np.CreatedAt, np.UpdatedAt = payment.StatusPending, now, now
		np.SucceededAt, np.FailedAt, np.RefundedAt = nil, nil, nil
		np.FailureReason, np.ReceiptID, np.RefundReceiptID, np.EntitlementIDs = "", "", "", nil
		np.Grant.ValidUntil, np.Grant.ExpiresAt = stampPtr(np.Grant.ValidUntil), stampPtr(np.Grant.ExpiresAt)
		if np.Checkout != nil {
			co := *np.Checkout
			co.ExpiresAt = stamp(co.ExpiresAt)
			np.Checkout = &co
		}
		if err := tx.Create(ref, paymentDoc(&np)); err != nil {
			return err
		}
		if err := tx.Create(keyRef, map[string]any{"paymentId": np.ID, "createdAt": now}); err != nil {
			return err
		}
		out = store.CreatePaymentResult{Payment: np, Created: true}
		return nil
	})
	return out, err
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
