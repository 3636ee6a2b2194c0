package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// ListPendingPayments lists the pending payments f selects, oldest first.
func (s *Store) ListPendingPayments(_ context.Context, f store.PendingFilter, p store.Page) ([]payment.Payment, string, error) {
	if err := f.Validate(); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []*payment.Payment
	for _, pay := range s.payments {
		if pay.Status == payment.StatusPending && pay.Provider == f.Provider && !pay.CreatedAt.After(f.CreatedBefore) {
			rows = append(rows, pay)
		}
	}
	pos := func(p *payment.Payment) position { return position{At: p.CreatedAt, ID: p.ID} }
	return pageOf(rows, p, listID("pending-payments", string(f.Provider), f.CreatedBefore.UTC().String()), pos, (*payment.Payment).Clone)
}
