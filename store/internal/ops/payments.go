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

// change runs one change of payment id in a unit of work named what. It
// reads the payment and whether ch's inbound event was recorded; check
// says whether the change is a replay, or refuses it. A replay (or a
// recorded event) is answered by replay, anything else made by apply;
// either way ch's inbound event is recorded with what the unit writes.
func (o Shared) change(ctx context.Context, what, id string, ch *store.PaymentChange,
	check func(*payment.Payment) (replay bool, err error),
	replay, apply func(tx unit.Tx, p payment.Payment) error) error {
	return o.run(ctx, what, func(tx unit.Tx) error {
		p, err := tx.Payment(id)
		if err != nil {
			return err
		}
		seen := false
		if ch.Inbound != nil {
			if seen, err = tx.InboundSeen(*ch.Inbound); err != nil {
				return err
			}
		}
		again, err := check(&p)
		switch {
		case seen || again:
			err = replay(tx, p)
		case err != nil:
			return changeError(err)
		default:
			err = apply(tx, p)
		}
		if err == nil && ch.Inbound != nil && !seen {
			tx.RecordInbound(*ch.Inbound)
		}
		return err
	})
}

// toward is the check of a move to status to (payment.Status.Toward).
func toward(to payment.Status) func(*payment.Payment) (bool, error) {
	return func(p *payment.Payment) (bool, error) {
		switch p.Status.Toward(to) {
		case payment.Replay:
			return true, nil
		case payment.Refuse:
			return false, payment.Refused(p, to)
		}
		return false, nil
	}
}

// current answers a change that changes nothing: p, the stored receipt
// receiptID (none if "") and p's entitlements as they are now.
func current(tx unit.Tx, p payment.Payment, receiptID string) (store.Completion, error) {
	out := store.Completion{Payment: p, Replayed: true}
	if receiptID != "" {
		r, err := tx.Receipt(receiptID)
		if errors.Is(err, store.ErrNotFound) {
			return store.Completion{}, store.Errorf(store.CodeInternal, "corrupt data: payment %s names missing receipt %s", p.ID, receiptID)
		}
		if err != nil {
			return store.Completion{}, err
		}
		out.Receipt = r
	}
	es, err := tx.Entitlements(p.EntitlementIDs)
	if err != nil {
		return store.Completion{}, err
	}
	now := tx.Now()
	for i := range es {
		es[i].Refresh(now)
	}
	out.Entitlements = es
	return out, nil
}

// revoke revokes the active ones of es at now (entitlement.Entitlement.Revoke),
// writes them, ends the holds it released on the caps of the wallet
// members who held them, and returns their entitlement.revoked events.
func revoke(tx unit.Tx, es []entitlement.Entitlement, now time.Time) ([]pendingEvent, error) {
	var evs []pendingEvent
	for i := range es {
		if e := &es[i]; e.Status == entitlement.StatusActive {
			open := e.Holds
			expired, released := e.Revoke(now)
			tx.UpdateEntitlement(e.Clone(), expired, released)
			if err := endMemberHolds(tx, e.AgentID, open, now); err != nil {
				return nil, err
			}
			evs = append(evs, ev(event.EntitlementRevoked, e.AgentID, e.Clone()))
		}
	}
	return evs, nil
}

// takeBack refunds amount of p (in full or in part): it locks p's
// entitlements, lets take take back from them at now (its events follow
// the payment's, of type t), signs the refund receipt of amount with what
// they hold after it, and stores p as settle makes it at now with that
// receipt.
func takeBack(tx unit.Tx, ch *store.PaymentChange, p payment.Payment, amount money.Money, t event.Type,
	take func(tx unit.Tx, es []entitlement.Entitlement, now time.Time) ([]pendingEvent, error),
	settle func(p payment.Payment, now time.Time, receiptID string) payment.Payment,
) (store.Completion, error) {
	es, err := tx.LockEntitlements(p.EntitlementIDs)
	if err != nil {
		return store.Completion{}, err
	}
	now := tx.Now()
	evs, err := take(tx, es, now)
	if err != nil {
		return store.Completion{}, err
	}
	grants := make([]receipt.Grant, 0, len(es))
	for i := range es {
		es[i].Refresh(now)
		grants = append(grants, receipt.GrantOf(&es[i]))
	}
	signed, err := sign(ch, newReceipt(receipt.KindRefund, ch.Issuer, &p, amount, grants, now))
	if err != nil {
		return store.Completion{}, err
	}
	p = settle(p, now, signed.ID)
	if err := addEvents(tx, now, append([]pendingEvent{ev(t, p.AgentID, &p)}, evs...)...); err != nil {
		return store.Completion{}, err
	}
	tx.CreateReceipt(signed)
	tx.PutPayment(p)
	return store.Completion{Payment: p, Receipt: signed, Entitlements: es}, nil
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

// pendingEvent is an event of a change before it is encoded.
type pendingEvent = unit.Pending

func ev(t event.Type, agentID string, data any) pendingEvent {
	return pendingEvent{Type: t, AgentID: agentID, Data: data}
}

// addEvents encodes and writes the events of one change at now.
func addEvents(tx unit.Tx, now time.Time, evs ...pendingEvent) error {
	out, err := unit.Events(now, evs...)
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
func (o Shared) CompletePayment(ctx context.Context, id string, ch store.PaymentChange) (out store.Completion, err error) {
	err = o.change(ctx, "complete payment", id, &ch, toward(payment.StatusSucceeded),
		func(tx unit.Tx, p payment.Payment) (err error) {
			out, err = current(tx, p, p.ReceiptID)
			return err
		},
		func(tx unit.Tx, p payment.Payment) error {
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
			out = store.Completion{Payment: p, Receipt: signed, Entitlements: []entitlement.Entitlement{e.Clone()}}
			return nil
		})
	return out, err
}

// FailPayment is store.EntitlementStore.FailPayment.
func (o Shared) FailPayment(ctx context.Context, id string, ch store.PaymentChange) (out payment.Payment, err error) {
	err = o.change(ctx, "fail payment", id, &ch, toward(payment.StatusFailed),
		func(_ unit.Tx, p payment.Payment) error {
			out = p
			return nil
		},
		func(tx unit.Tx, p payment.Payment) error {
			now := tx.Now()
			out = p.Failed(now, ch.Reason)
			tx.PutPayment(out)
			return addEvents(tx, now, ev(event.PaymentFailed, out.AgentID, &out))
		})
	return out, err
}

// RefundPayment is store.EntitlementStore.RefundPayment.
func (o Shared) RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (out store.Completion, err error) {
	err = o.change(ctx, "refund payment", id, &ch, toward(payment.StatusRefunded),
		func(tx unit.Tx, p payment.Payment) (err error) {
			receiptID := p.ReceiptID
			if p.Status == payment.StatusRefunded {
				receiptID = p.RefundReceiptID
			}
			out, err = current(tx, p, receiptID)
			return err
		},
		func(tx unit.Tx, p payment.Payment) (err error) {
			if out, err = takeBack(tx, &ch, p, p.Remaining(), event.PaymentRefunded, revoke, payment.Payment.Refunded); err != nil {
				return err
			}
			return tx.Fence()
		})
	return out, err
}

// RefundPaymentPart is store.ProviderPayments.RefundPaymentPart.
func (o Shared) RefundPaymentPart(ctx context.Context, id string, total money.Money, ch store.PaymentChange) (out store.Completion, err error) {
	var part money.Money
	err = o.change(ctx, "refund part of payment", id, &ch,
		func(p *payment.Payment) (replay bool, err error) {
			part, replay, err = p.RefundPart(total)
			return replay, err
		},
		func(tx unit.Tx, p payment.Payment) (err error) {
			out, err = current(tx, p, "")
			return err
		},
		func(tx unit.Tx, p payment.Payment) (err error) {
			out, err = takeBack(tx, &ch, p, part, event.PaymentPartiallyRefunded, func(tx unit.Tx, es []entitlement.Entitlement, now time.Time) ([]pendingEvent, error) {
				var lows []pendingEvent
				for i := range es {
					e := &es[i]
					expired := e.ExpireHolds(now)
					e.Refresh(now)
					e.CutCredits(part)
					if e.CutAlerts(now) {
						low := e.Clone()
						lows = append(lows, ev(event.EntitlementBalanceLow, e.AgentID, &low))
					}
					tx.UpdateEntitlement(e.Clone(), expired, nil)
				}
				return lows, nil
			}, func(p payment.Payment, now time.Time, _ string) payment.Payment { return p.PartlyRefunded(now, total) })
			return err
		})
	return out, err
}

// DisputePayment is store.ProviderPayments.DisputePayment.
func (o Shared) DisputePayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	return o.dispute(ctx, "dispute payment", id, &ch, (*payment.Payment).CheckDispute,
		func(tx unit.Tx, p payment.Payment, es []entitlement.Entitlement, now time.Time) (payment.Payment, []pendingEvent, error) {
			out := p.Disputed(now, ch.Reason)
			evs, err := revoke(tx, es, now)
			return out, append([]pendingEvent{ev(event.PaymentDisputed, out.AgentID, &out)}, evs...), err
		})
}

// WinDispute is store.ProviderPayments.WinDispute.
func (o Shared) WinDispute(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	return o.dispute(ctx, "win dispute", id, &ch, (*payment.Payment).CheckDisputeWon,
		func(tx unit.Tx, p payment.Payment, es []entitlement.Entitlement, now time.Time) (payment.Payment, []pendingEvent, error) {
			out := p.DisputeWon(now)
			evs := []pendingEvent{ev(event.PaymentDisputeWon, out.AgentID, &out)}
			for i := range es {
				if e := &es[i]; e.Reinstate(*p.DisputedAt) {
					tx.UpdateEntitlement(e.Clone(), nil, nil)
					evs = append(evs, ev(event.EntitlementGranted, e.AgentID, e.Clone()))
				}
			}
			return out, evs, nil
		})
}

// dispute is a change of a dispute's state (opened, won): check decides
// replay or refusal; otherwise apply gives the payment as changed and the
// events, from the payment's entitlements as locked and the instant.
func (o Shared) dispute(ctx context.Context, what, id string, ch *store.PaymentChange, check func(*payment.Payment) (bool, error),
	apply func(tx unit.Tx, p payment.Payment, es []entitlement.Entitlement, now time.Time) (payment.Payment, []pendingEvent, error),
) (out payment.Payment, err error) {
	err = o.change(ctx, what, id, ch, check,
		func(_ unit.Tx, p payment.Payment) error {
			out = p
			return nil
		},
		func(tx unit.Tx, p payment.Payment) error {
			es, err := tx.LockEntitlements(p.EntitlementIDs)
			if err != nil {
				return err
			}
			now := tx.Now()
			var evs []pendingEvent
			if out, evs, err = apply(tx, p, es, now); err != nil {
				return err
			}
			tx.PutPayment(out)
			return addEvents(tx, now, evs...)
		})
	return out, err
}
