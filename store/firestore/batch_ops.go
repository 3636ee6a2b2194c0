package firestore

import (
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// The operations of a batch (batch.go), each applied to the entitlement
// and the call's key document in memory. A call's own failure (a hold not
// found, a conflict) is its outcome's err; a returned error fails the batch.

func (k *batchKey) unused() bool { return k.Cons == nil && k.Hold == nil }

func (b *batch) consume(c *call, k *batchKey) (outcome, error) {
	if !k.unused() {
		return outcome{consume: charge.ReplayOf(k.used(b.now), c.consume)}, nil
	}
	if !b.ours(c.consume.AgentID) {
		return outcome{consume: charge.DeniedBy(b.entRef.ID, entitlement.ReasonNotFound)}, nil
	}
	cons, reason := b.e.Consume(b.now, c.consume, k.ref.ID, c.fingerprint)
	if reason != "" {
		return outcome{consume: charge.DeniedBy(b.e.ID, reason)}, nil
	}
	b.changed = b.changed || b.e.Type != entitlement.TypeSubscription
	k.Cons = &cons
	b.touch(k)
	after := b.after()
	if err := b.chargeEvents(&cons, &after); err != nil {
		return outcome{}, err
	}
	return outcome{consume: store.ConsumeResult{Outcome: store.Consumed, Consumption: cons, Entitlement: after}}, nil
}

func (b *batch) authorize(c *call, k *batchKey) (outcome, error) {
	if !k.unused() {
		return outcome{hold: charge.HoldReplayOf(k.used(b.now), c.hold)}, nil
	}
	if !b.ours(c.hold.AgentID) {
		return outcome{hold: charge.HoldDeniedBy(b.entRef.ID, entitlement.ReasonNotFound)}, nil
	}
	h, reason := b.e.Authorize(b.now, c.hold, k.ref.ID, c.fingerprint)
	if reason != "" {
		return outcome{hold: charge.HoldDeniedBy(b.e.ID, reason)}, nil
	}
	b.changed = true
	k.Hold = &h
	b.touch(k)
	return outcome{hold: store.HoldResult{Outcome: store.Held, Hold: h, Entitlement: b.after()}}, nil
}

func (b *batch) capture(c *call, k *batchKey) (outcome, error) {
	ch, done := settleCapture(&k.keyDoc, c)
	if done != nil {
		return *done, nil
	}
	h := k.Hold
	if !b.found {
		return outcome{}, b.corrupt(k, "its entitlement is missing")
	}
	cons, ok := b.e.Capture(b.now, h, ch, k.ref.ID)
	if !ok {
		return outcome{}, b.corrupt(k, "open, but not on its entitlement")
	}
	b.changed = true
	k.Cons = &cons
	b.touch(k)
	after := b.after()
	if err := b.chargeEvents(&cons, &after); err != nil {
		return outcome{}, err
	}
	return outcome{hold: store.HoldResult{Outcome: store.Captured, Hold: *h, Entitlement: after, Consumption: cons}}, nil
}

// settleCapture resolves what the capture c of the hold in k charges, or
// answers it (done) when that needs no entitlement: the hold is unknown or
// another agent's, the amount is not covered, or the hold has ended (a
// replay if it was captured with the same charge, else a conflict). An
// ended hold never changes again, so the answer holds outside a
// transaction too.
func settleCapture(k *keyDoc, c *call) (entitlement.Charge, *outcome) {
	h := k.Hold
	if h == nil || h.AgentID != c.agentID {
		return entitlement.Charge{}, &outcome{err: holdNotFound(c.key)}
	}
	ch, err := h.Settle(c.amount)
	switch {
	case err != nil:
		return ch, &outcome{err: store.Wrap(store.CodeInvalid, err, "capture hold")}
	case h.Status == entitlement.HoldOpen:
		return ch, nil
	case h.Status == entitlement.HoldCaptured && *h.Captured == ch:
		return ch, &outcome{hold: store.HoldResult{Outcome: store.Replay, Hold: *h, Consumption: *k.Cons}}
	case h.Status == entitlement.HoldCaptured:
		return ch, &outcome{err: store.Errorf(store.CodeConflict, "hold %q was captured with another amount", h.ID)}
	case h.Status == entitlement.HoldExpired:
		return ch, &outcome{err: store.Wrap(store.CodeConflict, entitlement.ErrHoldExpired, "hold %q", h.ID)}
	}
	return ch, &outcome{err: store.Errorf(store.CodeConflict, "hold %q was %s", h.ID, h.Status)}
}

func (b *batch) release(c *call, k *batchKey) (outcome, error) {
	if done := checkRelease(&k.keyDoc, c); done != nil {
		return *done, nil
	}
	h := k.Hold
	if !b.found || !b.e.Release(b.now, h) {
		return outcome{}, b.corrupt(k, "open, but not on its entitlement")
	}
	b.changed = true
	b.touch(k)
	return outcome{hold: store.HoldResult{Outcome: store.Released, Hold: *h, Entitlement: b.after()}}, nil
}

// checkRelease answers the release c of the hold in k when that needs no
// entitlement (as settleCapture does): an unknown or other agent's hold, a
// replay of a hold released or expired, a conflict for a captured one.
func checkRelease(k *keyDoc, c *call) *outcome {
	h := k.Hold
	switch {
	case h == nil || h.AgentID != c.agentID:
		return &outcome{err: holdNotFound(c.key)}
	case h.Status == entitlement.HoldOpen:
		return nil
	case h.Status == entitlement.HoldCaptured:
		return &outcome{err: store.Errorf(store.CodeConflict, "hold %q was captured", h.ID)}
	}
	return &outcome{hold: store.HoldResult{Outcome: store.Replay, Hold: *h}}
}

func (b *batch) refund(c *call, k *batchKey) (outcome, error) {
	ch, done := checkRefund(&k.keyDoc, c)
	if done != nil {
		return *done, nil
	}
	cons := *k.Cons
	if cons.Refund != nil {
		if cons.Refund.Charge != ch {
			return outcome{err: store.Wrap(store.CodeConflict, entitlement.ErrRefundRefused, "consumption %q was refunded with another amount", cons.ID)}, nil
		}
		return outcome{refund: store.RefundResult{Consumption: cons, Entitlement: b.after(), Replayed: true}}, nil
	}
	if !b.found {
		return outcome{}, b.corrupt(k, "its entitlement is missing")
	}
	// Refund changes nothing when it refuses, but for the lazy reset the
	// batch has applied already; the copy keeps that from mattering.
	e := b.e.Clone()
	if err := e.Refund(b.now, &cons, c.amount); err != nil {
		return outcome{err: store.Wrap(store.CodeConflict, err, "refund consumption %q", cons.ID)}, nil
	}
	if err := b.fence(c); err != nil {
		if store.CodeOf(err) == store.CodeInternal {
			return outcome{}, err
		}
		return outcome{err: err}, nil
	}
	b.e, b.changed = e, true
	k.Cons = &cons
	b.touch(k)
	if err := b.event(event.ConsumptionRefunded, &cons); err != nil {
		return outcome{}, err
	}
	return outcome{refund: store.RefundResult{Consumption: cons, Entitlement: b.after()}}, nil
}

// checkRefund resolves what the refund c of the consumption in k gives
// back, or answers it (done) when it is refused whatever the entitlement's
// state: an unknown consumption, or an amount it does not cover.
func checkRefund(k *keyDoc, c *call) (entitlement.Charge, *outcome) {
	if k.Cons == nil {
		return entitlement.Charge{}, &outcome{err: consumptionNotFound(c.key)}
	}
	ch, err := k.Cons.RefundCharge(c.amount)
	if err != nil {
		return ch, &outcome{err: store.Wrap(store.CodeInvalid, err, "refund consumption %q", k.Cons.ID)}
	}
	return ch, nil
}

func holdNotFound(id string) error { return store.Errorf(store.CodeNotFound, "hold %q", id) }

func consumptionNotFound(id string) error {
	return store.Errorf(store.CodeNotFound, "consumption %q", id)
}
