package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/payment"
)

// The payment changes are package ops', on this store's unit of work
// (unit.go): each locks the payment row first (and then its entitlements
// in ID order), so concurrent changes of one payment wait for each other.

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
		refunded_cents = $11, disputed_at = $12, dispute_reason = $13, provider_intent_id = $14, dispute_won_at = $15
		WHERE id = $1`, p.ID, string(p.Status), p.UpdatedAt, p.SucceededAt, p.FailedAt,
		p.FailureReason, p.RefundedAt, p.ReceiptID, p.RefundReceiptID, ids, refunded, p.DisputedAt, p.DisputeReason,
		p.ProviderIntentID, p.DisputeWonAt)
	return err
}
