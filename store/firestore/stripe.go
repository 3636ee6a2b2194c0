package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// qPendingPayments finds the pending payments of a provider, oldest first,
// for the reconciliation sweep (ListPendingPayments).
var qPendingPayments = Query{
	Name: "payments.pending", Collection: colPayments,
	Equal: []string{"provider", "status"}, Order: "createdAt",
}

// ListPendingPayments implements store.EntitlementStore.
func (s *Store) ListPendingPayments(ctx context.Context, f store.PendingFilter, p store.Page) ([]payment.Payment, string, error) {
	if err := f.Validate(); err != nil {
		return nil, "", err
	}
	before := stamp(f.CreatedBefore)
	q := s.build(qPendingPayments,
		filter{"provider", "==", string(f.Provider)},
		filter{"status", "==", string(payment.StatusPending)},
		filter{"createdAt", "<=", before})
	return list(ctx, q, listKey(qPendingPayments, string(f.Provider), before.String()), qPendingPayments.Order, p, paymentFrom)
}
