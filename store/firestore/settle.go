package firestore

import (
	"context"
	"strings"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// The payment changes are package ops', on this store's unit of work
// (unit.go); complete, fail and refund share concurrent identical calls
// (flight.go).

// txEntitlements reads entitlements by ID inside tx; a missing one is corruption.
func (s *Store) txEntitlements(tx *firestore.Transaction, ids []string) ([]entitlement.Entitlement, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = s.entitlementRef(id)
	}
	snaps, err := tx.GetAll(refs)
	if err != nil {
		return nil, err
	}
	out := make([]entitlement.Entitlement, 0, len(snaps))
	for _, snap := range snaps {
		if !snap.Exists() {
			return nil, store.Errorf(store.CodeInternal, "corrupt data: payment names missing entitlement %s", docPath(snap.Ref))
		}
		e, err := entitlementFrom(snap)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// CompletePayment implements store.EntitlementStore. Concurrent identical
// calls share one transaction (flight.go).
func (s *Store) CompletePayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	return s.shareCompletion(ctx, "complete payment", id, &ch, func(ctx context.Context) (store.Completion, error) {
		return s.shared.CompletePayment(ctx, id, ch)
	})
}

// FailPayment implements store.EntitlementStore. Concurrent identical calls
// share one transaction (flight.go).
func (s *Store) FailPayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	fail := func(ctx context.Context) (payment.Payment, error) {
		return inTurn(s, ctx, id, "fail payment", func(ctx context.Context) (payment.Payment, error) { return s.shared.FailPayment(ctx, id, ch) })
	}
	if store.FenceOf(ctx) != nil {
		return fail(ctx)
	}
	p, joined, err := s.failures.do(ctx, changeKey("fail", id, &ch), "fail payment", s.retryBudget, fail)
	if joined {
		p = p.Clone()
	}
	return p, err
}

// RefundPayment implements store.EntitlementStore. Concurrent identical
// calls share one transaction (flight.go).
func (s *Store) RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	return s.shareCompletion(ctx, "refund payment", id, &ch, func(ctx context.Context) (store.Completion, error) {
		return s.shared.RefundPayment(ctx, id, ch)
	})
}

// shareCompletion runs change, or joins the same change of payment id in
// flight. A caller that joined gets a copy of the answer, Replayed: the
// change was made once, by the call it joined. A fenced change shares
// nothing (flight.go says why).
func (s *Store) shareCompletion(ctx context.Context, what, id string, ch *store.PaymentChange,
	change func(context.Context) (store.Completion, error)) (store.Completion, error) {
	inner := change
	change = func(ctx context.Context) (store.Completion, error) { return inTurn(s, ctx, id, what, inner) }
	if store.FenceOf(ctx) != nil {
		return change(ctx)
	}
	c, joined, err := s.completions.do(ctx, changeKey(what, id, ch), what, s.retryBudget, change)
	if !joined || err != nil {
		return c, err
	}
	out := store.Completion{Payment: c.Payment.Clone(), Receipt: c.Receipt.Clone(), Replayed: true}
	for i := range c.Entitlements {
		out.Entitlements = append(out.Entitlements, c.Entitlements[i].Clone())
	}
	return out, nil
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

// all runs writes in order and stops at the first error.
func all(writes []func() error) error {
	for _, w := range writes {
		if err := w(); err != nil {
			return err
		}
	}
	return nil
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
