package firestore

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
)

// RefundPaymentPart implements store.EntitlementStore: one transaction
// reads the payment, its inbound marker and its entitlements, then writes
// the entitlements' cut balances, the receipt, the payment and the event.
func (s *Store) RefundPaymentPart(ctx context.Context, id string, total money.Money, ch store.PaymentChange) (store.Completion, error) {
	var out store.Completion
	err := s.run(ctx, "refund part of payment", func(ctx context.Context, tx *firestore.Transaction) error {
		c, err := s.readChange(tx, id, &ch)
		if err != nil {
			return err
		}
		p := c.p
		part, replay, err := transition.RefundPart(&p, total)
		if c.seen {
			replay, err = true, nil
		}
		if err != nil {
			return err
		}
		if replay {
			now := s.clock()
			if out, err = s.current(tx, p, "", now); err != nil {
				return err
			}
			return c.recordInbound(tx, &ch, now)
		}
		es, closeLeases, now, err := s.grantsOf(tx, &p)
		if err != nil {
			return err
		}
		writes := []func() error{closeLeases}
		grants := make([]receipt.Grant, 0, len(es))
		for i := range es {
			e := &es[i]
			expiry := expiries(e)
			for _, hid := range e.ExpireHolds(now) {
				if err := s.endHold(tx, hid, entitlement.HoldExpired, expiry[hid]); err != nil {
					return err
				}
			}
			e.Refresh(now)
			transition.CutCredits(e, part)
			cut := *e
			writes = append(writes, func() error { return tx.Set(s.entitlementRef(cut.ID), entitlementDoc(&cut)) })
			grants = append(grants, receipt.GrantOf(e))
		}
		signed, err := transition.SignReceipt(&ch, transition.NewReceipt(receipt.KindRefund, ch.Issuer, p.AgentID, p.ID, part, grants, now))
		if err != nil {
			return err
		}
		p.RefundedAmount, p.UpdatedAt = &total, now
		writes = append(writes,
			func() error { return tx.Create(s.col(colReceipts).Doc(docID(signed.ID)), receiptDoc(&signed)) },
			func() error { return tx.Set(s.paymentRef(p.ID), paymentDoc(&p)) },
			func() error { return s.enqueue(tx, event.PaymentPartiallyRefunded, p.AgentID, now, p) },
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

// DisputePayment implements store.EntitlementStore, as RefundPayment
// revokes: one transaction that gathers the entitlements' leases and ends
// their holds.
func (s *Store) DisputePayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	var out payment.Payment
	err := s.run(ctx, "dispute payment", func(ctx context.Context, tx *firestore.Transaction) error {
		c, err := s.readChange(tx, id, &ch)
		if err != nil {
			return err
		}
		p := c.p
		out = p
		replay, err := transition.CheckDispute(&p)
		if c.seen {
			replay, err = true, nil
		}
		if err != nil {
			return err
		}
		if replay {
			return c.recordInbound(tx, &ch, s.clock())
		}
		es, closeLeases, now, err := s.grantsOf(tx, &p)
		if err != nil {
			return err
		}
		writes := []func() error{closeLeases}
		for i := range es {
			e := &es[i]
			e.Refresh(now)
			if e.Status != entitlement.StatusActive {
				continue
			}
			if err := s.endAllHolds(tx, e, now); err != nil {
				return err
			}
			e.Status, e.RevokedAt = entitlement.StatusRevoked, &now
			revoked := *e
			writes = append(writes,
				func() error { return tx.Set(s.entitlementRef(revoked.ID), entitlementDoc(&revoked)) },
				func() error { return s.enqueue(tx, event.EntitlementRevoked, revoked.AgentID, now, revoked) })
		}
		p.DisputedAt, p.DisputeReason, p.UpdatedAt = &now, ch.Reason, now
		writes = append(writes,
			func() error { return tx.Set(s.paymentRef(p.ID), paymentDoc(&p)) },
			func() error { return s.enqueue(tx, event.PaymentDisputed, p.AgentID, now, p) },
			func() error { return c.recordInbound(tx, &ch, now) },
		)
		if err := all(writes); err != nil {
			return err
		}
		out = p
		return nil
	})
	return out, err
}
