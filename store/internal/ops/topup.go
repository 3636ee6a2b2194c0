package ops

import (
	"context"
	"errors"
	"time"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
	"github.com/stipend-mcp/stipend/topup"
)

// This file holds the steps of auto top-up (store.TopUps); package topup
// has their rules.

// changeTopUp runs change on the top-up of agentID in one unit of work and
// stores it when change says it changed. With ensure, an unknown account
// is created (with no top-up) instead of being ErrNotFound.
func (o Shared) changeTopUp(ctx context.Context, what, agentID string, ensure bool,
	change func(tx unit.Tx, t *topup.TopUp, now time.Time) (changed bool, err error)) (topup.TopUp, error) {
	var out topup.TopUp
	err := o.run(ctx, what, func(tx unit.Tx) error {
		t, err := tx.TopUp(agentID)
		if ensure && errors.Is(err, store.ErrNotFound) {
			t, err = topup.TopUp{AgentID: agentID}, tx.EnsureAccount(agentID)
		}
		if err != nil {
			return err
		}
		changed, err := change(tx, &t, tx.Now())
		if err != nil {
			return err
		}
		if changed {
			tx.PutTopUp(t.Clone())
		}
		out = t
		return nil
	})
	return out, err
}

// SaveTopUpMethod is store.TopUps.SaveTopUpMethod.
func (o Shared) SaveTopUpMethod(ctx context.Context, agentID string, m topup.Method) (topup.TopUp, error) {
	if agentID == "" || m.Customer == "" || m.PaymentMethod == "" {
		return topup.TopUp{}, store.Errorf(store.CodeInvalid, "method: an agent, a customer and a payment method are required")
	}
	return o.changeTopUp(ctx, "save top-up method", agentID, true, func(_ unit.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		t.Method, t.UpdatedAt = &m, now
		return true, nil
	})
}

// PutTopUp is store.TopUps.PutTopUp.
func (o Shared) PutTopUp(ctx context.Context, agentID string, set topup.Settings) (topup.TopUp, error) {
	if err := set.Validate(); err != nil {
		return topup.TopUp{}, store.Wrap(store.CodeInvalid, err, "top-up")
	}
	return o.changeTopUp(ctx, "put top-up", agentID, false, func(_ unit.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		if err := topup.Set(t, set.Clone(), now); err != nil {
			return false, store.Wrap(store.CodeConflict, err, "top-up of %q", agentID)
		}
		return true, nil
	})
}

// DisableTopUp is store.TopUps.DisableTopUp.
func (o Shared) DisableTopUp(ctx context.Context, agentID, reason string) (topup.TopUp, error) {
	return o.changeTopUp(ctx, "disable top-up", agentID, false, func(_ unit.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		if !t.Enabled {
			return false, nil
		}
		topup.Disable(t, reason, now)
		return true, nil
	})
}

// BeginTopUp is store.TopUps.BeginTopUp. A refusal of topup.Begin still
// stores what it settled, then answers the Conflict.
func (o Shared) BeginTopUp(ctx context.Context, agentID string, expectSeq int64) (payment.Payment, error) {
	var out payment.Payment
	var refused error
	_, err := o.changeTopUp(ctx, "begin top-up", agentID, false, func(tx unit.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		refused, out = nil, payment.Payment{}
		prior, err := pendingPayment(tx, t)
		if err != nil {
			return false, err
		}
		pendingBefore := t.PendingPaymentID
		p, failure, berr := topup.Begin(t, expectSeq, prior, now)
		if failure != nil {
			if err := addEvents(tx, now, ev(event.TopUpFailed, agentID, failure)); err != nil {
				return false, err
			}
		}
		if berr != nil {
			refused = store.Wrap(store.CodeConflict, berr, "top-up of %q", agentID)
			return t.PendingPaymentID != pendingBefore, nil // settled, or not
		}
		// The payment's ID and key come from the sequence, which only this
		// unit moves: they cannot exist unless the state is corrupt.
		if _, err := tx.PaymentByKey(p.IdempotencyKey); !errors.Is(err, store.ErrNotFound) {
			return false, found(err, store.CodeInternal, "top-up payment %s (sequence %d) exists already", p.ID, t.Seq)
		}
		var fresh bool
		if out, fresh, err = createPayment(tx, p); err == nil && !fresh {
			err = store.Errorf(store.CodeInternal, "top-up payment %s (sequence %d) exists already", p.ID, t.Seq)
		}
		return true, err
	})
	if err == nil {
		err = refused
	}
	return out, err
}

// SettleTopUp is store.TopUps.SettleTopUp.
func (o Shared) SettleTopUp(ctx context.Context, agentID string) (topup.TopUp, error) {
	return o.changeTopUp(ctx, "settle top-up", agentID, false, func(tx unit.Tx, t *topup.TopUp, now time.Time) (bool, error) {
		prior, err := pendingPayment(tx, t)
		if err != nil {
			return false, err
		}
		failure, changed := topup.Settle(t, prior, now)
		if failure != nil {
			if err := addEvents(tx, now, ev(event.TopUpFailed, agentID, failure)); err != nil {
				return false, err
			}
		}
		return changed, nil
	})
}

// pendingPayment reads the payment of t's pending top-up, or nil.
func pendingPayment(tx unit.Tx, t *topup.TopUp) (*payment.Payment, error) {
	if t.PendingPaymentID == "" {
		return nil, nil
	}
	p, err := tx.Payment(t.PendingPaymentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &p, nil
}
