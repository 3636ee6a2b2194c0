package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
)

// LinkProviderIntent implements store.EntitlementStore. The payment's row
// is locked; two payments racing for one intent meet on the unique index
// payments_by_provider_intent, whose violation is a Conflict.
func (s *Store) LinkProviderIntent(ctx context.Context, id, intentID string) (payment.Payment, error) {
	if intentID == "" {
		return payment.Payment{}, store.Errorf(store.CodeInvalid, "intentId: required")
	}
	var out payment.Payment
	err := s.run(ctx, "link payment intent", func(tx pgx.Tx) error {
		p, err := scanPayment(tx.QueryRow(ctx, `SELECT `+paymentColumns+` FROM payments WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.Errorf(store.CodeNotFound, "payment %q", id)
		}
		if err != nil {
			return err
		}
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payments WHERE provider_intent_id = $1 AND id <> $2)`,
			intentID, id).Scan(&taken); err != nil {
			return err
		}
		if err := transition.CheckLink(&p, intentID, taken); err != nil || p.ProviderIntentID == intentID {
			out = p
			return err
		}
		p.ProviderIntentID, p.UpdatedAt = intentID, s.clock()
		out = p
		_, err = tx.Exec(ctx, `UPDATE payments SET provider_intent_id = $2, updated_at = $3 WHERE id = $1`, id, intentID, p.UpdatedAt)
		return err
	})
	return out, err
}

// ListPendingPayments implements store.EntitlementStore, on the partial
// index payments_pending.
func (s *Store) ListPendingPayments(ctx context.Context, f store.PendingFilter, p store.Page) ([]payment.Payment, string, error) {
	if err := transition.CheckPendingFilter(f); err != nil {
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
