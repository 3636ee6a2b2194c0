package firestore

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
)

// This file holds the payment state changes: complete, fail and refund, each
// one transaction that reads everything first (payment, inbound marker,
// entitlements, account) and then writes.

// change is the read phase shared by the three state changes.
type change struct {
	p payment.Payment
	// seen is true when ch.Inbound was already recorded: the call is then a
	// replay of the current state.
	seen       bool
	inboundRef *firestore.DocumentRef
}

func (s *Store) readChange(tx *firestore.Transaction, id string, ch *store.PaymentChange) (change, error) {
	p, err := s.txPayment(tx, id)
	if err != nil {
		return change{}, err
	}
	c := change{p: p}
	if ch.Inbound != nil {
		c.inboundRef = s.col(colInbound).Doc(transition.InboundKey(ch.Inbound.Source, ch.Inbound.EventID))
		_, err := tx.Get(c.inboundRef)
		switch {
		case err == nil:
			c.seen = true
		case !isNotFound(err):
			return change{}, err
		}
	}
	return c, nil
}

// recordInbound creates the inbound marker (the same document
// DeliveryStore.RecordInboundEvent writes) unless it exists.
func (c *change) recordInbound(tx *firestore.Transaction, ch *store.PaymentChange, now time.Time) error {
	if c.inboundRef == nil || c.seen {
		return nil
	}
	return tx.Create(c.inboundRef, map[string]any{
		"source": ch.Inbound.Source, "eventId": ch.Inbound.EventID, "firstSeenAt": now,
	})
}

// current reads, inside tx, the stored receipt receiptID (if any) and the
// payment's entitlements, for answering a replay.
func (s *Store) current(tx *firestore.Transaction, p payment.Payment, receiptID string, now time.Time) (store.Completion, error) {
	out := store.Completion{Payment: p, Replayed: true}
	if receiptID != "" {
		snap, err := tx.Get(s.col(colReceipts).Doc(docID(receiptID)))
		if err != nil {
			return store.Completion{}, err
		}
		if out.Receipt, err = receiptFrom(snap); err != nil {
			return store.Completion{}, err
		}
	}
	es, err := s.txEntitlements(tx, p.EntitlementIDs)
	if err != nil {
		return store.Completion{}, err
	}
	for i := range es {
		es[i].Refresh(now)
	}
	out.Entitlements = es
	return out, nil
}

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
	return s.shareCompletion(ctx, "complete payment", id, &ch, s.completePayment)
}

// FailPayment implements store.EntitlementStore. Concurrent identical calls
// share one transaction (flight.go).
func (s *Store) FailPayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	if store.FenceOf(ctx) != nil {
		return s.failPayment(ctx, id, ch)
	}
	p, joined, err := s.failures.do(ctx, changeKey("fail", id, &ch), "fail payment", s.retryBudget,
		func(ctx context.Context) (payment.Payment, error) { return s.failPayment(ctx, id, ch) })
	if joined {
		p = p.Clone()
	}
	return p, err
}

// RefundPayment implements store.EntitlementStore. Concurrent identical
// calls share one transaction (flight.go).
func (s *Store) RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	return s.shareCompletion(ctx, "refund payment", id, &ch, s.refundPayment)
}

// shareCompletion runs change, or joins the same change of payment id in
// flight. A caller that joined gets a copy of the answer, Replayed: the
// change was made once, by the call it joined. A fenced change shares
// nothing (flight.go says why).
func (s *Store) shareCompletion(ctx context.Context, what, id string, ch *store.PaymentChange,
	change func(context.Context, string, store.PaymentChange) (store.Completion, error)) (store.Completion, error) {
	if store.FenceOf(ctx) != nil {
		return change(ctx, id, *ch)
	}
	c, joined, err := s.completions.do(ctx, changeKey(what, id, ch), what, s.retryBudget,
		func(ctx context.Context) (store.Completion, error) { return change(ctx, id, *ch) })
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

// completePayment is CompletePayment's transaction.
func (s *Store) completePayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	var out store.Completion
	err := s.run(ctx, "complete payment", func(ctx context.Context, tx *firestore.Transaction) error {
		now := s.clock()
		c, err := s.readChange(tx, id, &ch)
		if err != nil {
			return err
		}
		p := c.p
		if c.seen || p.Status.Toward(payment.StatusSucceeded) == payment.Replay {
			if out, err = s.current(tx, p, p.ReceiptID, now); err != nil {
				return err
			}
			return c.recordInbound(tx, &ch, now)
		}
		if p.Status.Toward(payment.StatusSucceeded) == payment.Refuse {
			return transition.RefusedPayment(id, p.Status, payment.StatusSucceeded)
		}
		createAccount, err := s.ensureAccount(tx, p.AgentID, now)
		if err != nil {
			return err
		}
		e := normalized(p.Grant.Entitlement(uuid.NewString(), &p, now), now)
		signed, err := transition.SignReceipt(&ch, transition.NewReceipt(receipt.KindPayment, ch.Issuer, p.AgentID, p.ID, p.Amount, []receipt.Grant{receipt.GrantOf(&e)}, now))
		if err != nil {
			return err
		}
		p.Status, p.SucceededAt, p.UpdatedAt = payment.StatusSucceeded, &now, now
		p.ReceiptID, p.EntitlementIDs = signed.ID, []string{e.ID}

		if createAccount != nil {
			if err := createAccount(); err != nil {
				return err
			}
		}
		writes := []func() error{
			func() error { return tx.Create(s.entitlementRef(e.ID), entitlementDoc(&e)) },
			func() error { return tx.Create(s.col(colReceipts).Doc(docID(signed.ID)), receiptDoc(&signed)) },
			func() error { return tx.Set(s.paymentRef(p.ID), paymentDoc(&p)) },
			func() error { return s.enqueue(tx, event.PaymentSucceeded, p.AgentID, now, p) },
			func() error { return s.enqueue(tx, event.EntitlementGranted, p.AgentID, now, e) },
			func() error { return c.recordInbound(tx, &ch, now) },
		}
		if err := all(writes); err != nil {
			return err
		}
		out = store.Completion{Payment: p, Receipt: signed, Entitlements: []entitlement.Entitlement{e}}
		return nil
	})
	return out, err
}

// failPayment is FailPayment's transaction.
func (s *Store) failPayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	var out payment.Payment
	err := s.run(ctx, "fail payment", func(ctx context.Context, tx *firestore.Transaction) error {
		now := s.clock()
		c, err := s.readChange(tx, id, &ch)
		if err != nil {
			return err
		}
		out = c.p
		if c.seen || out.Status.Toward(payment.StatusFailed) == payment.Replay {
			return c.recordInbound(tx, &ch, now)
		}
		if out.Status.Toward(payment.StatusFailed) == payment.Refuse {
			return transition.RefusedPayment(id, out.Status, payment.StatusFailed)
		}
		out.Status, out.FailedAt, out.UpdatedAt, out.FailureReason = payment.StatusFailed, &now, now, ch.Reason
		return all([]func() error{
			func() error { return tx.Set(s.paymentRef(out.ID), paymentDoc(&out)) },
			func() error { return s.enqueue(tx, event.PaymentFailed, out.AgentID, now, out) },
			func() error { return c.recordInbound(tx, &ch, now) },
		})
	})
	return out, err
}

// refundPayment is RefundPayment's transaction.
func (s *Store) refundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	var out store.Completion
	err := s.run(ctx, "refund payment", func(ctx context.Context, tx *firestore.Transaction) error {
		fd, err := s.readFence(ctx, tx)
		if err != nil {
			return err
		}
		c, err := s.readChange(tx, id, &ch)
		if err != nil {
			return err
		}
		p := c.p
		if c.seen || p.Status.Toward(payment.StatusRefunded) == payment.Replay {
			receiptID := p.ReceiptID
			if p.Status == payment.StatusRefunded {
				receiptID = p.RefundReceiptID
			}
			now := s.clock()
			if out, err = s.current(tx, p, receiptID, now); err != nil {
				return err
			}
			return c.recordInbound(tx, &ch, now)
		}
		if p.Status.Toward(payment.StatusRefunded) == payment.Refuse {
			return transition.RefusedPayment(id, p.Status, payment.StatusRefunded)
		}
		es, closeLeases, now, err := s.grantsOf(tx, &p)
		if err != nil {
			return err
		}
		writes := []func() error{closeLeases}
		grants := make([]receipt.Grant, 0, len(es))
		for i := range es {
			e := &es[i]
			e.Refresh(now)
			if e.Status == entitlement.StatusActive {
				if err := s.endAllHolds(tx, e, now); err != nil {
					return err
				}
				e.Status, e.RevokedAt = entitlement.StatusRevoked, &now
				revoked := *e
				writes = append(writes,
					func() error { return tx.Set(s.entitlementRef(revoked.ID), entitlementDoc(&revoked)) },
					func() error { return s.enqueue(tx, event.EntitlementRevoked, revoked.AgentID, now, revoked) })
			}
			grants = append(grants, receipt.GrantOf(e))
		}
		signed, err := transition.SignReceipt(&ch, transition.NewReceipt(receipt.KindRefund, ch.Issuer, p.AgentID, p.ID, transition.Remaining(&p), grants, now))
		if err != nil {
			return err
		}
		p.Status, p.RefundedAt, p.UpdatedAt, p.RefundReceiptID = payment.StatusRefunded, &now, now, signed.ID
		if err := fd.mark(tx, now); err != nil {
			return err
		}
		writes = append(writes,
			func() error { return tx.Create(s.col(colReceipts).Doc(docID(signed.ID)), receiptDoc(&signed)) },
			func() error { return tx.Set(s.paymentRef(p.ID), paymentDoc(&p)) },
			func() error { return s.enqueue(tx, event.PaymentRefunded, p.AgentID, now, p) },
			func() error { return c.recordInbound(tx, &ch, now) },
		)
		if err := all(writes); err != nil {
			return err
		}
		out = store.Completion{Payment: p, Receipt: signed, Entitlements: es}
		return nil
	})
	return out, err
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
