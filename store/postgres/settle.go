package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
)

// This file holds the payment state changes: complete, fail and refund,
// each one transaction that locks the payment row first (and, for a
// refund, its entitlements in ID order), so concurrent changes of one
// payment wait for each other.

// change is the read phase shared by the three state changes.
type change struct {
	p payment.Payment
	// seen is true when ch.Inbound was already recorded: the call is then a
	// replay of the current state.
	seen bool
}

func readChange(ctx context.Context, tx pgx.Tx, id string, ch *store.PaymentChange) (change, error) {
	p, err := scanPayment(tx.QueryRow(ctx, `SELECT `+paymentColumns+` FROM payments WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return change{}, store.Errorf(store.CodeNotFound, "payment %q", id)
	}
	if err != nil {
		return change{}, err
	}
	c := change{p: p}
	if ch.Inbound != nil {
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM inbound_events WHERE source = $1 AND event_id = $2)`,
			ch.Inbound.Source, ch.Inbound.EventID).Scan(&c.seen)
		if err != nil {
			return change{}, err
		}
	}
	return c, nil
}

// recordInbound records ch.Inbound (the record RecordInboundEvent writes)
// unless it was seen. If another transaction recorded it meanwhile, the
// whole change starts over and then answers as the replay it is.
func (c *change) recordInbound(ctx context.Context, tx pgx.Tx, ch *store.PaymentChange, now time.Time) error {
	if ch.Inbound == nil || c.seen {
		return nil
	}
	tag, err := tx.Exec(ctx, insertInboundSQL, ch.Inbound.Source, ch.Inbound.EventID, now)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return errRetry
	}
	return nil
}

// current answers a replay: p, the stored receipt receiptID (if any) and
// p's entitlements as they are now.
func current(ctx context.Context, tx pgx.Tx, p payment.Payment, receiptID string, now time.Time) (store.Completion, error) {
	out := store.Completion{Payment: p, Replayed: true}
	if receiptID != "" {
		r, err := scanReceipt(tx.QueryRow(ctx, `SELECT `+receiptColumns+` FROM receipts WHERE id = $1`, receiptID))
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return store.Completion{}, store.Errorf(store.CodeInternal, "corrupt data: payment %s names missing receipt %s", p.ID, receiptID)
			}
			return store.Completion{}, err
		}
		out.Receipt = r
	}
	es, err := paymentEntitlements(ctx, tx, &p, false)
	if err != nil {
		return store.Completion{}, err
	}
	for i := range es {
		es[i].Refresh(now)
	}
	out.Entitlements = es
	return out, nil
}

// paymentEntitlements reads p's entitlements inside tx, in p's order,
// locking them (in ID order, so two transactions never lock them in
// opposite orders) when lock is set. A missing one is corruption.
func paymentEntitlements(ctx context.Context, tx pgx.Tx, p *payment.Payment, lock bool) ([]entitlement.Entitlement, error) {
	if len(p.EntitlementIDs) == 0 {
		return nil, nil
	}
	q := `SELECT ` + entitlementColumns + ` FROM entitlements WHERE id = ANY($1) ORDER BY id`
	if lock {
		q += ` FOR UPDATE`
	}
	rows, err := tx.Query(ctx, q, p.EntitlementIDs)
	if err != nil {
		return nil, err
	}
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Entitlement, error) { return scanEntitlement(r) })
	if err != nil {
		return nil, err
	}
	out := make([]entitlement.Entitlement, 0, len(p.EntitlementIDs))
	for _, id := range p.EntitlementIDs {
		i := slices.IndexFunc(es, func(e entitlement.Entitlement) bool { return e.ID == id })
		if i < 0 {
			return nil, store.Errorf(store.CodeInternal, "corrupt data: payment %s names missing entitlement %s", p.ID, id)
		}
		out = append(out, es[i])
	}
	return out, nil
}

// updatePayment writes p's lifecycle fields inside tx.
func updatePayment(ctx context.Context, tx pgx.Tx, p *payment.Payment) error {
	ids := p.EntitlementIDs
	if ids == nil {
		ids = []string{}
	}
	_, err := tx.Exec(ctx, `UPDATE payments SET status = $2, updated_at = $3, succeeded_at = $4, failed_at = $5,
		failure_reason = $6, refunded_at = $7, receipt_id = $8, refund_receipt_id = $9, entitlement_ids = $10
		WHERE id = $1`, p.ID, string(p.Status), p.UpdatedAt, p.SucceededAt, p.FailedAt,
		p.FailureReason, p.RefundedAt, p.ReceiptID, p.RefundReceiptID, ids)
	return err
}

// CompletePayment implements store.EntitlementStore.
func (s *Store) CompletePayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	var out store.Completion
	err := s.run(ctx, "complete payment", func(tx pgx.Tx) error {
		now := s.clock()
		c, err := readChange(ctx, tx, id, &ch)
		if err != nil {
			return err
		}
		p := c.p
		if c.seen || p.Status.Toward(payment.StatusSucceeded) == payment.Replay {
			if out, err = current(ctx, tx, p, p.ReceiptID, now); err != nil {
				return err
			}
			return c.recordInbound(ctx, tx, &ch, now)
		}
		if p.Status.Toward(payment.StatusSucceeded) == payment.Refuse {
			return transition.RefusedPayment(id, p.Status, payment.StatusSucceeded)
		}
		e := normalized(p.Grant.Entitlement(uuid.NewString(), &p, now), now)
		signed, err := transition.SignReceipt(&ch, transition.NewReceipt(receipt.KindPayment, ch.Issuer, p.AgentID, p.ID, p.Amount, []receipt.Grant{receipt.GrantOf(&e)}, now))
		if err != nil {
			return err
		}
		p.Status, p.SucceededAt, p.UpdatedAt = payment.StatusSucceeded, &now, now
		p.ReceiptID, p.EntitlementIDs = signed.ID, []string{e.ID}
		if err := ensureAccount(ctx, tx, p.AgentID, now); err != nil {
			return err
		}
		created, err := insertEntitlement(ctx, tx, &e)
		if err != nil {
			return err
		}
		if !created {
			return errRetry // a fresh UUID collided: try again
		}
		if err := insertReceipt(ctx, tx, &signed); err != nil {
			return err
		}
		if err := updatePayment(ctx, tx, &p); err != nil {
			return err
		}
		if err := enqueue(ctx, tx, now, pending(event.PaymentSucceeded, p.AgentID, &p), pending(event.EntitlementGranted, p.AgentID, &e)); err != nil {
			return err
		}
		if err := c.recordInbound(ctx, tx, &ch, now); err != nil {
			return err
		}
		out = store.Completion{Payment: p, Receipt: signed, Entitlements: []entitlement.Entitlement{e}}
		return nil
	})
	return out, err
}

// FailPayment implements store.EntitlementStore.
func (s *Store) FailPayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	var out payment.Payment
	err := s.run(ctx, "fail payment", func(tx pgx.Tx) error {
		now := s.clock()
		c, err := readChange(ctx, tx, id, &ch)
		if err != nil {
			return err
		}
		out = c.p
		if c.seen || out.Status.Toward(payment.StatusFailed) == payment.Replay {
			return c.recordInbound(ctx, tx, &ch, now)
		}
		if out.Status.Toward(payment.StatusFailed) == payment.Refuse {
			return transition.RefusedPayment(id, out.Status, payment.StatusFailed)
		}
		out.Status, out.FailedAt, out.UpdatedAt, out.FailureReason = payment.StatusFailed, &now, now, ch.Reason
		if err := updatePayment(ctx, tx, &out); err != nil {
			return err
		}
		if err := enqueue(ctx, tx, now, pending(event.PaymentFailed, out.AgentID, &out)); err != nil {
			return err
		}
		return c.recordInbound(ctx, tx, &ch, now)
	})
	return out, err
}

// RefundPayment implements store.EntitlementStore.
func (s *Store) RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	var out store.Completion
	err := s.run(ctx, "refund payment", func(tx pgx.Tx) error {
		c, err := readChange(ctx, tx, id, &ch)
		if err != nil {
			return err
		}
		now := s.clock()
		p := c.p
		if c.seen || p.Status.Toward(payment.StatusRefunded) == payment.Replay {
			receiptID := p.ReceiptID
			if p.Status == payment.StatusRefunded {
				receiptID = p.RefundReceiptID
			}
			if out, err = current(ctx, tx, p, receiptID, now); err != nil {
				return err
			}
			return c.recordInbound(ctx, tx, &ch, now)
		}
		if p.Status.Toward(payment.StatusRefunded) == payment.Refuse {
			return transition.RefusedPayment(id, p.Status, payment.StatusRefunded)
		}
		es, err := paymentEntitlements(ctx, tx, &p, true)
		if err != nil {
			return err
		}
		now = s.clock() // after the entitlements' locks: see Store.clock
		if err := s.markFence(ctx, tx, now); err != nil {
			return err
		}
		grants := make([]receipt.Grant, 0, len(es))
		for i := range es {
			e := &es[i]
			if e.Status == entitlement.StatusActive {
				if err := revoke(ctx, tx, e, now); err != nil {
					return err
				}
			}
			e.Refresh(now)
			grants = append(grants, receipt.GrantOf(e))
		}
		signed, err := transition.SignReceipt(&ch, transition.NewReceipt(receipt.KindRefund, ch.Issuer, p.AgentID, p.ID, transition.Remaining(&p), grants, now))
		if err != nil {
			return err
		}
		p.Status, p.RefundedAt, p.UpdatedAt, p.RefundReceiptID = payment.StatusRefunded, &now, now, signed.ID
		if err := insertReceipt(ctx, tx, &signed); err != nil {
			return err
		}
		if err := updatePayment(ctx, tx, &p); err != nil {
			return err
		}
		if err := enqueue(ctx, tx, now, pending(event.PaymentRefunded, p.AgentID, &p)); err != nil {
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
