package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
)

// RefundPaymentPart implements store.EntitlementStore: one transaction
// that locks the payment row and then its entitlements (settle.go's order).
func (s *Store) RefundPaymentPart(ctx context.Context, id string, total money.Money, ch store.PaymentChange) (store.Completion, error) {
	var out store.Completion
	err := s.run(ctx, "refund part of payment", func(tx pgx.Tx) error {
		now := s.clock()
		c, err := readChange(ctx, tx, id, &ch)
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
			if out, err = current(ctx, tx, p, "", now); err != nil {
				return err
			}
			return c.recordInbound(ctx, tx, &ch, now)
		}
		es, err := paymentEntitlements(ctx, tx, &p, true)
		if err != nil {
			return err
		}
		now = s.clock() // after the entitlements' locks: see Store.clock
		grants := make([]receipt.Grant, 0, len(es))
		for i := range es {
			e := &es[i]
			if err := endHolds(ctx, tx, e.ExpireHolds(now), entitlement.HoldExpired, now); err != nil {
				return err
			}
			e.Refresh(now)
			if taken := transition.CutCredits(e, part); taken.Cents > 0 {
				if err := updateEntitlement(ctx, tx, e); err != nil {
					return err
				}
			}
			grants = append(grants, receipt.GrantOf(e))
		}
		signed, err := transition.SignReceipt(&ch, transition.NewReceipt(receipt.KindRefund, ch.Issuer, p.AgentID, p.ID, part, grants, now))
		if err != nil {
			return err
		}
		p.RefundedAmount, p.UpdatedAt = &total, now
		if err := insertReceipt(ctx, tx, &signed); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE payments SET refunded_cents = $2, updated_at = $3 WHERE id = $1`, p.ID, total.Cents, now); err != nil {
			return err
		}
		if err := enqueue(ctx, tx, now, pending(event.PaymentPartiallyRefunded, p.AgentID, &p)); err != nil {
			return err
		}
		if err := c.recordInbound(ctx, tx, &ch, now); err != nil {
			return err
		}
		out = store.Completion{Payment: p, Receipt: signed, Entitlements: es}
		return nil
	})
	return out, err
}

// DisputePayment implements store.EntitlementStore, revoking as
// RefundPayment does.
func (s *Store) DisputePayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	var out payment.Payment
	err := s.run(ctx, "dispute payment", func(tx pgx.Tx) error {
		now := s.clock()
		c, err := readChange(ctx, tx, id, &ch)
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
			return c.recordInbound(ctx, tx, &ch, now)
		}
		es, err := paymentEntitlements(ctx, tx, &p, true)
		if err != nil {
			return err
		}
		now = s.clock() // after the entitlements' locks: see Store.clock
		for i := range es {
			if es[i].Status == entitlement.StatusActive {
				if err := revoke(ctx, tx, &es[i], now); err != nil {
					return err
				}
			}
		}
		p.DisputedAt, p.DisputeReason, p.UpdatedAt = &now, ch.Reason, now
		if _, err := tx.Exec(ctx, `UPDATE payments SET disputed_at = $2, dispute_reason = $3, updated_at = $4 WHERE id = $1`,
			p.ID, now, ch.Reason, now); err != nil {
			return err
		}
		if err := enqueue(ctx, tx, now, pending(event.PaymentDisputed, p.AgentID, &p)); err != nil {
			return err
		}
		if err := c.recordInbound(ctx, tx, &ch, now); err != nil {
			return err
		}
		out = p
		return nil
	})
	return out, err
}
