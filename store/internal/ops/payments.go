// Package ops holds the store operations off the hot path once for every
// backend: each loads what it needs through a unit of work (package unit),
// calls the pure rule of the domain package (payment, entitlement, …) with
// the instant of the change, and writes what the rule returned. A backend's
// store method is a one-line call of its operation. Only the adapters under
// store/ import it; callers use the contract in package store.
package ops

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// This file holds the payment state changes: complete, fail, refund (in
// full and in part) and dispute. Each reads the payment and whether the
// provider event causing it was recorded; a recorded event, or a payment
// already in the target state, makes the call a replay of what is stored.

// loaded is what every payment change reads first.
type loaded struct {
	p payment.Payment
	// seen is true when the change's inbound event was recorded already:
	// the call is then a replay of the current state.
	seen bool
}

func load(tx unit.Tx, id string, ch *store.PaymentChange) (loaded, error) {
	p, err := tx.Payment(id)
	if err != nil {
		return loaded{}, err
	}
	l := loaded{p: p}
	if ch.Inbound != nil {
		if l.seen, err = tx.InboundSeen(*ch.Inbound); err != nil {
			return loaded{}, err
		}
	}
	return l, nil
}

// record records the change's inbound event, unless it was seen.
func (l *loaded) record(tx unit.Tx, ch *store.PaymentChange) {
	if ch.Inbound != nil && !l.seen {
		tx.RecordInbound(*ch.Inbound)
	}
}

// replay answers a change that changes nothing: p, the stored receipt
// receiptID (none if "") and p's entitlements as they are now; it records
// the inbound event.
func (l *loaded) replay(tx unit.Tx, ch *store.PaymentChange, receiptID string) (store.Completion, error) {
	out := store.Completion{Payment: l.p, Replayed: true}
	if receiptID != "" {
		r, err := tx.Receipt(receiptID)
		if errors.Is(err, store.ErrNotFound) {
			return store.Completion{}, store.Errorf(store.CodeInternal, "corrupt data: payment %s names missing receipt %s", l.p.ID, receiptID)
		}
		if err != nil {
			return store.Completion{}, err
		}
		out.Receipt = r
	}
	es, err := tx.Entitlements(l.p.EntitlementIDs)
	if err != nil {
		return store.Completion{}, err
	}
	now := tx.Now()
	for i := range es {
		es[i].Refresh(now)
	}
	out.Entitlements = es
	l.record(tx, ch)
	return out, nil
}

// changeError is the store error of a change the payment refused.
func changeError(err error) error {
	var ce *payment.ChangeError
	if !errors.As(err, &ce) {
		return err
	}
	if ce.Refused {
		return store.Errorf(store.CodeConflict, "%s", ce.Message)
	}
	return store.Errorf(store.CodeInvalid, "%s", ce.Message)
}

// events encodes the events of one change at now.
func events(now time.Time, evs ...pendingEvent) ([]event.Event, error) {
	out := make([]event.Event, len(evs))
	for i, e := range evs {
		var err error
		if out[i], err = unit.NewEvent(e.t, e.agentID, e.data, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pendingEvent is an event of a change before it is encoded.
type pendingEvent struct {
	t       event.Type
	agentID string
	data    any
}

func ev(t event.Type, agentID string, data any) pendingEvent {
	return pendingEvent{t: t, agentID: agentID, data: data}
}

// addEvents encodes and writes the events of one change at now.
func addEvents(tx unit.Tx, now time.Time, evs ...pendingEvent) error {
	out, err := events(now, evs...)
	if err != nil {
		return err
	}
	tx.AddEvents(out...)
	return nil
}

// sign makes the receipt of a change that issues one (complete, refund):
// Invalid without a signing function, Internal when signing fails.
func sign(ch *store.PaymentChange, r receipt.Receipt) (receipt.Signed, error) {
	if ch.Sign == nil {
		return receipt.Signed{}, store.Errorf(store.CodeInvalid, "payment change: no signing function")
	}
	jws, err := ch.Sign(r)
	if err != nil {
		return receipt.Signed{}, store.Wrap(store.CodeInternal, err, "signing receipt %s", r.ID)
	}
	return receipt.Signed{Receipt: r, JWS: jws}, nil
}

// newReceipt is a new receipt of kind for p: amount and grants, issued by
// issuer at now.
func newReceipt(kind receipt.Kind, issuer string, p *payment.Payment, amount money.Money, grants []receipt.Grant, now time.Time) receipt.Receipt {
	if grants == nil {
		grants = []receipt.Grant{}
	}
	return receipt.Receipt{
		ID: uuid.NewString(), Version: receipt.Version, Kind: kind,
		Issuer: issuer, AgentID: p.AgentID, PaymentID: p.ID, Amount: amount,
		Grants: grants, IssuedAt: now,
	}
}

// CompletePayment is store.EntitlementStore.CompletePayment.
func CompletePayment(ctx context.Context, run unit.Run, id string, ch store.PaymentChange) (store.Completion, error) {
	var out store.Completion
	err := run(ctx, "complete payment", func(tx unit.Tx) error {
		l, err := load(tx, id, &ch)
		if err != nil {
			return err
		}
		p := l.p
		switch {
		case l.seen || p.Status.Toward(payment.StatusSucceeded) == payment.Replay:
			out, err = l.replay(tx, &ch, p.ReceiptID)
			return err
		case p.Status.Toward(payment.StatusSucceeded) == payment.Refuse:
			return changeError(payment.Refused(&p, payment.StatusSucceeded))
		}
		if err := tx.EnsureAccount(p.AgentID); err != nil {
			return err
		}
		now := tx.Now()
		e := tx.Normalize(p.Grant.Entitlement(uuid.NewString(), &p, now))
		signed, err := sign(&ch, newReceipt(receipt.KindPayment, ch.Issuer, &p, p.Amount, []receipt.Grant{receipt.GrantOf(&e)}, now))
		if err != nil {
			return err
		}
		p = p.Succeeded(now, signed.ID, []string{e.ID})
		if err := addEvents(tx, now, ev(event.PaymentSucceeded, p.AgentID, &p), ev(event.EntitlementGranted, p.AgentID, &e)); err != nil {
			return err
		}
		tx.CreateEntitlement(e)
		tx.CreateReceipt(signed)
		tx.PutPayment(p)
		l.record(tx, &ch)
		out = store.Completion{Payment: p, Receipt: signed, Entitlements: []entitlement.Entitlement{e.Clone()}}
		return nil
	})
	return out, err
}

// FailPayment is store.EntitlementStore.FailPayment.
func FailPayment(ctx context.Context, run unit.Run, id string, ch store.PaymentChange) (payment.Payment, error) {
	var out payment.Payment
	err := run(ctx, "fail payment", func(tx unit.Tx) error {
		l, err := load(tx, id, &ch)
		if err != nil {
			return err
		}
		p := l.p
		switch {
		case l.seen || p.Status.Toward(payment.StatusFailed) == payment.Replay:
			out = p
			l.record(tx, &ch)
			return nil
		case p.Status.Toward(payment.StatusFailed) == payment.Refuse:
			return changeError(payment.Refused(&p, payment.StatusFailed))
		}
		now := tx.Now()
		p = p.Failed(now, ch.Reason)
		if err := addEvents(tx, now, ev(event.PaymentFailed, p.AgentID, &p)); err != nil {
			return err
		}
		tx.PutPayment(p)
		l.record(tx, &ch)
		out = p
		return nil
	})
	return out, err
}

// RefundPayment is store.EntitlementStore.RefundPayment.
func RefundPayment(ctx context.Context, run unit.Run, id string, ch store.PaymentChange) (store.Completion, error) {
	var out store.Completion
	err := run(ctx, "refund payment", func(tx unit.Tx) error {
		l, err := load(tx, id, &ch)
		if err != nil {
			return err
		}
		p := l.p
		switch {
		case l.seen || p.Status.Toward(payment.StatusRefunded) == payment.Replay:
			receiptID := p.ReceiptID
			if p.Status == payment.StatusRefunded {
				receiptID = p.RefundReceiptID
			}
			out, err = l.replay(tx, &ch, receiptID)
			return err
		case p.Status.Toward(payment.StatusRefunded) == payment.Refuse:
			return changeError(payment.Refused(&p, payment.StatusRefunded))
		}
		es, err := tx.LockEntitlements(p.EntitlementIDs)
		if err != nil {
			return err
		}
		now := tx.Now()
		var evs []pendingEvent
		grants := make([]receipt.Grant, 0, len(es))
		for i := range es {
			e := &es[i]
			if e.Status == entitlement.StatusActive {
				expired, released := e.Revoke(now)
				tx.UpdateEntitlement(e.Clone(), expired, released)
				evs = append(evs, ev(event.EntitlementRevoked, e.AgentID, e.Clone()))
			}
			e.Refresh(now)
			grants = append(grants, receipt.GrantOf(e))
		}
		signed, err := sign(&ch, newReceipt(receipt.KindRefund, ch.Issuer, &p, p.Remaining(), grants, now))
		if err != nil {
			return err
		}
		p = p.Refunded(now, signed.ID)
		if err := addEvents(tx, now, append([]pendingEvent{ev(event.PaymentRefunded, p.AgentID, &p)}, evs...)...); err != nil {
			return err
		}
		if err := tx.Fence(); err != nil {
			return err
		}
		tx.CreateReceipt(signed)
		tx.PutPayment(p)
		l.record(tx, &ch)
		out = store.Completion{Payment: p, Receipt: signed, Entitlements: es}
		return nil
	})
	return out, err
}

// RefundPaymentPart is store.ProviderPayments.RefundPaymentPart.
func RefundPaymentPart(ctx context.Context, run unit.Run, id string, total money.Money, ch store.PaymentChange) (store.Completion, error) {
	var out store.Completion
	err := run(ctx, "refund part of payment", func(tx unit.Tx) error {
		l, err := load(tx, id, &ch)
		if err != nil {
			return err
		}
		p := l.p
		part, replay, err := p.RefundPart(total)
		if l.seen {
			replay, err = true, nil
		}
		if err != nil {
			return changeError(err)
		}
		if replay {
			out, err = l.replay(tx, &ch, "")
			return err
		}
		es, err := tx.LockEntitlements(p.EntitlementIDs)
		if err != nil {
			return err
		}
		now := tx.Now()
		grants := make([]receipt.Grant, 0, len(es))
		for i := range es {
			e := &es[i]
			expired := e.ExpireHolds(now)
			e.Refresh(now)
			e.CutCredits(part)
			tx.UpdateEntitlement(e.Clone(), expired, nil)
			grants = append(grants, receipt.GrantOf(e))
		}
		signed, err := sign(&ch, newReceipt(receipt.KindRefund, ch.Issuer, &p, part, grants, now))
		if err != nil {
			return err
		}
		p = p.PartlyRefunded(now, total)
		if err := addEvents(tx, now, ev(event.PaymentPartiallyRefunded, p.AgentID, &p)); err != nil {
			return err
		}
		tx.CreateReceipt(signed)
		tx.PutPayment(p)
		l.record(tx, &ch)
		out = store.Completion{Payment: p, Receipt: signed, Entitlements: es}
		return nil
	})
	return out, err
}

// DisputePayment is store.ProviderPayments.DisputePayment.
func DisputePayment(ctx context.Context, run unit.Run, id string, ch store.PaymentChange) (payment.Payment, error) {
	var out payment.Payment
	err := run(ctx, "dispute payment", func(tx unit.Tx) error {
		l, err := load(tx, id, &ch)
		if err != nil {
			return err
		}
		p := l.p
		replay, err := p.CheckDispute()
		if l.seen {
			replay, err = true, nil
		}
		if err != nil {
			return changeError(err)
		}
		if replay {
			out = p
			l.record(tx, &ch)
			return nil
		}
		es, err := tx.LockEntitlements(p.EntitlementIDs)
		if err != nil {
			return err
		}
		now := tx.Now()
		p = p.Disputed(now, ch.Reason)
		evs := []pendingEvent{ev(event.PaymentDisputed, p.AgentID, &p)}
		for i := range es {
			e := &es[i]
			if e.Status == entitlement.StatusActive {
				expired, released := e.Revoke(now)
				tx.UpdateEntitlement(e.Clone(), expired, released)
				evs = append(evs, ev(event.EntitlementRevoked, e.AgentID, e.Clone()))
			}
		}
		if err := addEvents(tx, now, evs...); err != nil {
			return err
		}
		tx.PutPayment(p)
		l.record(tx, &ch)
		out = p
		return nil
	})
	return out, err
}
