package firestore

import (
	"context"
	"strings"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// payment reads the payment id from src.
func (s *Store) payment(src source, id string) (payment.Payment, error) {
	return load(src, s.doc(colPayments, id), paymentFrom, store.Errorf(store.CodeNotFound, "payment %q", id))
}

// paymentByKey reads the key's pointer document, then the payment.
func (s *Store) paymentByKey(src source, key string) (payment.Payment, error) {
	id, err := load(src, s.doc(colPaymentsIdempotency, key), pointer("paymentId"), store.Errorf(store.CodeNotFound, "payment for idempotency key"))
	if err != nil {
		return payment.Payment{}, err
	}
	return s.payment(src, id)
}

func (s *Store) paymentByIntent(src source, intentID string) (payment.Payment, error) {
	snaps, err := src.all(s.build(qPaymentByIntent, filter{"providerIntentId", "==", intentID}).Limit(1))
	if err != nil {
		return payment.Payment{}, err
	}
	if len(snaps) == 0 {
		return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment for provider intent %q", intentID)
	}
	return paymentFrom(snaps[0])
}

// GetPayment implements store.EntitlementStore.
func (s *Store) GetPayment(ctx context.Context, id string) (payment.Payment, error) {
	return s.payment(direct{ctx, "get payment"}, id)
}

// FindPaymentByIdempotencyKey implements store.EntitlementStore.
func (s *Store) FindPaymentByIdempotencyKey(ctx context.Context, key string) (payment.Payment, error) {
	return s.paymentByKey(direct{ctx, "find payment by idempotency key"}, key)
}

// FindPaymentByProviderIntentID implements store.EntitlementStore.
func (s *Store) FindPaymentByProviderIntentID(ctx context.Context, intentID string) (payment.Payment, error) {
	if intentID == "" {
		return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment for provider intent")
	}
	return s.paymentByIntent(direct{ctx, "find payment by provider intent"}, intentID)
}

// The payment changes are package ops', on this store's unit of work
// (unit.go), each in the payment's turn; complete, fail and refund share
// concurrent identical calls (flight.go).

// CompletePayment implements store.EntitlementStore.
func (s *Store) CompletePayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	return share(s, &s.completions, ctx, "complete payment", id, &ch, replayed, func(ctx context.Context) (store.Completion, error) {
		return s.shared.CompletePayment(ctx, id, ch)
	})
}

// FailPayment implements store.EntitlementStore.
func (s *Store) FailPayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	return share(s, &s.failures, ctx, "fail payment", id, &ch, (*payment.Payment).Clone, func(ctx context.Context) (payment.Payment, error) {
		return s.shared.FailPayment(ctx, id, ch)
	})
}

// RefundPayment implements store.EntitlementStore.
func (s *Store) RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	return share(s, &s.completions, ctx, "refund payment", id, &ch, replayed, func(ctx context.Context) (store.Completion, error) {
		return s.shared.RefundPayment(ctx, id, ch)
	})
}

// share runs change in the turn of payment id, or joins the same change in
// flight; a caller that joined gets a copy of the answer (joined). A fenced
// change shares nothing (flight.go says why).
func share[T any](s *Store, f *flights[T], ctx context.Context, what, id string, ch *store.PaymentChange,
	joined func(*T) T, change func(context.Context) (T, error)) (T, error) {
	run := func(ctx context.Context) (T, error) { return inTurn(s, ctx, id, what, change) }
	if store.FenceOf(ctx) != nil {
		return run(ctx)
	}
	v, j, err := f.do(ctx, changeKey(what, id, ch), what, s.retryBudget, run)
	if j && err == nil {
		v = joined(&v)
	}
	return v, err
}

// replayed is a copy of c for a caller that joined its change: Replayed,
// since the change was made once, by the call it joined.
func replayed(c *store.Completion) store.Completion {
	out := store.Completion{Payment: c.Payment.Clone(), Receipt: c.Receipt.Clone(), Replayed: true}
	for i := range c.Entitlements {
		out.Entitlements = append(out.Entitlements, c.Entitlements[i].Clone())
	}
	return out
}

// changeKey names a change of payment id: calls with one key are the same
// call (the same target state, issuer, reason and provider event), and
// only those share a transaction. ch.Sign is left out: it must be pure,
// and two signers of one issuer sign equally valid receipts.
func changeKey(what, id string, ch *store.PaymentChange) string {
	parts := []string{what, id, ch.Issuer, ch.Reason}
	if ch.Inbound != nil {
		parts = append(parts, "inbound", ch.Inbound.Source, ch.Inbound.EventID)
	}
	return strings.Join(parts, "\x00")
}

// RefundPaymentPart implements store.ProviderPayments, in the payment's
// turn (flight.go).
func (s *Store) RefundPaymentPart(ctx context.Context, id string, total money.Money, ch store.PaymentChange) (store.Completion, error) {
	return inTurn(s, ctx, id, "refund part of payment", func(ctx context.Context) (store.Completion, error) {
		return s.shared.RefundPaymentPart(ctx, id, total, ch)
	})
}

// DisputePayment implements store.ProviderPayments, in the payment's turn
// (flight.go).
func (s *Store) DisputePayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	return inTurn(s, ctx, id, "dispute payment", func(ctx context.Context) (payment.Payment, error) {
		return s.shared.DisputePayment(ctx, id, ch)
	})
}

// WinDispute implements store.ProviderPayments, in the payment's turn
// (flight.go).
func (s *Store) WinDispute(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	return inTurn(s, ctx, id, "win dispute", func(ctx context.Context) (payment.Payment, error) {
		return s.shared.WinDispute(ctx, id, ch)
	})
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

// receipt reads the receipt id from src.
func (s *Store) receipt(src source, id string) (receipt.Signed, error) {
	return load(src, s.doc(colReceipts, id), receiptFrom, store.Errorf(store.CodeNotFound, "receipt %q", id))
}

// GetReceipt implements store.EntitlementStore.
func (s *Store) GetReceipt(ctx context.Context, id string) (receipt.Signed, error) {
	return s.receipt(direct{ctx, "get receipt"}, id)
}

// ListReceipts implements store.EntitlementStore.
func (s *Store) ListReceipts(ctx context.Context, agentID string, p store.Page) ([]receipt.Signed, string, error) {
	q := s.build(qReceiptsByAgent, filter{"agentId", "==", agentID})
	return list(ctx, q, listKey(qReceiptsByAgent, agentID), qReceiptsByAgent.Order, p, receiptFrom)
}
