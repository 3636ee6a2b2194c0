package firestore

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
)

// qPendingPayments finds the pending payments of a provider, oldest first,
// for the reconciliation sweep (ListPendingPayments).
var qPendingPayments = Query{
	Name: "payments.pending", Collection: colPayments,
	Equal: []string{"provider", "status"}, Order: "createdAt",
}

// LinkProviderIntent implements store.EntitlementStore. The transaction
// reads the payment and queries the intent, so two payments racing for one
// intent meet on the query's lock and one of them is refused.
func (s *Store) LinkProviderIntent(ctx context.Context, id, intentID string) (payment.Payment, error) {
	if intentID == "" {
		return payment.Payment{}, store.Errorf(store.CodeInvalid, "intentId: required")
	}
	var out payment.Payment
	err := s.run(ctx, "link payment intent", func(ctx context.Context, tx *firestore.Transaction) error {
		p, err := s.txPayment(tx, id)
		if err != nil {
			return err
		}
		linked, err := tx.Documents(s.build(qPaymentByIntent, filter{"providerIntentId", "==", intentID}).Limit(1)).GetAll()
		if err != nil {
			return err
		}
		taken := len(linked) > 0 && linked[0].Ref.ID != docID(id)
		if err := transition.CheckLink(&p, intentID, taken); err != nil {
			return err
		}
		if p.ProviderIntentID == intentID {
			out = p
			return nil
		}
		p.ProviderIntentID, p.UpdatedAt = intentID, stamp(s.clock())
		out = p
		return tx.Update(s.paymentRef(id), []firestore.Update{
			{Path: "providerIntentId", Value: intentID},
			{Path: "updatedAt", Value: p.UpdatedAt},
		})
	})
	return out, err
}

// ListPendingPayments implements store.EntitlementStore.
func (s *Store) ListPendingPayments(ctx context.Context, f store.PendingFilter, p store.Page) ([]payment.Payment, string, error) {
	if err := transition.CheckPendingFilter(f); err != nil {
		return nil, "", err
	}
	before := stamp(f.CreatedBefore)
	q := s.build(qPendingPayments,
		filter{"provider", "==", string(f.Provider)},
		filter{"status", "==", string(payment.StatusPending)},
		filter{"createdAt", "<=", before})
	return list(ctx, q, listKey(qPendingPayments, string(f.Provider), before.String()), qPendingPayments.Order, p, paymentFrom)
}
