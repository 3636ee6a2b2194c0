package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
)

// The payment changes are package ops', on the memory unit of work.

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
