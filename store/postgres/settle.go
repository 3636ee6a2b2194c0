package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
)

// The payment changes are package ops', on this store's unit of work
// (unit.go): each locks the payment row first (and then its entitlements
// in ID order), so concurrent changes of one payment wait for each other.

// CompletePayment implements store.EntitlementStore (ops.CompletePayment).
func (s *Store) CompletePayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	return ops.CompletePayment(ctx, s.unit, id, ch)
}

// FailPayment implements store.EntitlementStore (ops.FailPayment).
func (s *Store) FailPayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	return ops.FailPayment(ctx, s.unit, id, ch)
}

// RefundPayment implements store.EntitlementStore (ops.RefundPayment).
func (s *Store) RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	return ops.RefundPayment(ctx, s.unit, id, ch)
}

// RefundPaymentPart implements store.ProviderPayments (ops.RefundPaymentPart).
func (s *Store) RefundPaymentPart(ctx context.Context, id string, total money.Money, ch store.PaymentChange) (store.Completion, error) {
	return ops.RefundPaymentPart(ctx, s.unit, id, total, ch)
}

// DisputePayment implements store.ProviderPayments (ops.DisputePayment).
func (s *Store) DisputePayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	return ops.DisputePayment(ctx, s.unit, id, ch)
}

// updatePayment writes p's changing fields inside tx.
func updatePayment(ctx context.Context, tx pgx.Tx, p *payment.Payment) error {
	ids := p.EntitlementIDs
	if ids == nil {
		ids = []string{}
	}
	var refunded int64
	if p.RefundedAmount != nil {
		refunded = p.RefundedAmount.Cents
	}
	_, err := tx.Exec(ctx, `UPDATE payments SET status = $2, updated_at = $3, succeeded_at = $4, failed_at = $5,
		failure_reason = $6, refunded_at = $7, receipt_id = $8, refund_receipt_id = $9, entitlement_ids = $10,
		refunded_cents = $11, disputed_at = $12, dispute_reason = $13
		WHERE id = $1`, p.ID, string(p.Status), p.UpdatedAt, p.SucceededAt, p.FailedAt,
		p.FailureReason, p.RefundedAt, p.ReceiptID, p.RefundReceiptID, ids, refunded, p.DisputedAt, p.DisputeReason)
	return err
}
