package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
)

// RefundPaymentPart implements store.ProviderPayments (ops.RefundPaymentPart).
func (s *Store) RefundPaymentPart(ctx context.Context, id string, total money.Money, ch store.PaymentChange) (store.Completion, error) {
	return ops.RefundPaymentPart(ctx, s.unit, id, total, ch)
}

// DisputePayment implements store.ProviderPayments (ops.DisputePayment).
func (s *Store) DisputePayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	return ops.DisputePayment(ctx, s.unit, id, ch)
}
