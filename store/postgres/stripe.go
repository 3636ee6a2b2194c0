package postgres

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// ListPendingPayments implements store.EntitlementStore, on the partial
// index payments_pending.
func (s *Store) ListPendingPayments(ctx context.Context, f store.PendingFilter, p store.Page) ([]payment.Payment, string, error) {
	if err := f.Validate(); err != nil {
		return nil, "", err
	}
	before := stamp(f.CreatedBefore)
	q := listQuery{
		name:  "pending-payments",
		from:  `SELECT ` + paymentColumns + ` FROM payments WHERE status = 'pending' AND provider = $1 AND created_at <= $2`,
		args:  []any{string(f.Provider), before},
		order: "created_at",
		parts: []string{string(f.Provider), before.String()},
	}
	return list(ctx, s.pool, q, p, scanPayment, func(p *payment.Payment) (time.Time, string) { return p.CreatedAt, p.ID })
}
