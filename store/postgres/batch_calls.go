package postgres

import (
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// The calls of a batch, each applied to the entitlement as the batch read
// it and as the calls before it left it. What they write is collected in
// the batch and written by batch.write.

// call applies one call. An error is that call's alone, except an Internal
// one, which fails the batch.
func (b *batch) call(o *op) (opResult, error) {
	switch o.kind {
	case opConsume:
		return opResult{consume: b.consume(o.consume)}, nil
	case opAuthorize:
		return opResult{hold: b.authorize(o.authorize)}, nil
	case opCapture:
		r, err := b.capture(o)
		return opResult{hold: r}, err
	default:
		r, err := b.release(o)
		return opResult{hold: r}, err
	}
}

func (b *batch) consume(req *entitlement.ConsumeRequest) store.ConsumeResult {
	k := keyPair{req.AgentID, req.IdempotencyKey}
	if u, ok := b.used[k]; ok {
		return charge.ReplayOf(u, req)
	}
	if !b.found || b.e.AgentID != req.AgentID {
		return charge.DeniedBy(b.entitlementID, entitlement.ReasonNotFound)
	}
	c, reason := b.e.Consume(b.now, req, uuid.NewString(), req.Fingerprint())
	if reason != "" {
		return charge.DeniedBy(b.entitlementID, reason)
	}
	b.used[k] = charge.Used{Consumption: c}
	b.addConsumption(c)
	b.newKeys = append(b.newKeys, newKey{keyPair: k, consumptionID: &c.ID})
	return store.ConsumeResult{Outcome: store.Consumed, Consumption: c, Entitlement: b.shown()}
}

func (b *batch) authorize(req *entitlement.HoldRequest) store.HoldResult {
	k := keyPair{req.AgentID, req.IdempotencyKey}
	if u, ok := b.used[k]; ok {
		return charge.HoldReplayOf(u, req)
	}
	if !b.found || b.e.AgentID != req.AgentID {
		return charge.HoldDeniedBy(b.entitlementID, entitlement.ReasonNotFound)
	}
	h, reason := b.e.Authorize(b.now, req, uuid.NewString(), req.Fingerprint())
	if reason != "" {
		return charge.HoldDeniedBy(b.entitlementID, reason)
	}
	b.used[k] = charge.Used{Hold: h}
	b.holds[h.ID] = h
	b.newHolds = append(b.newHolds, h)
	b.newKeys = append(b.newKeys, newKey{keyPair: k, holdID: &h.ID})
	return store.HoldResult{Outcome: store.Held, Hold: h, Entitlement: b.shown()}
}

// hold returns the hold a capture or release names, or ErrNotFound for an
// unknown hold or another agent's.
func (b *batch) hold(o *op) (entitlement.Hold, error) {
	h, ok := b.holds[o.holdID]
	if !ok || h.AgentID != o.agentID || !b.found || h.EntitlementID != b.e.ID {
		return entitlement.Hold{}, errHoldNotFound(o.holdID)
	}
	return h, nil
}

func (b *batch) capture(o *op) (store.HoldResult, error) {
	h, err := b.hold(o)
	if err != nil {
		return store.HoldResult{}, err
	}
	ch, err := h.Settle(o.amount)
	if err != nil {
		return store.HoldResult{}, store.Wrap(store.CodeInvalid, err, "capture hold %q", h.ID)
	}
	switch h.Status {
	case entitlement.HoldCaptured:
		if *h.Captured != ch {
			return store.HoldResult{}, store.Errorf(store.CodeConflict, "hold %q was captured with another amount", h.ID)
		}
		c, err := b.capturedConsumption(&h)
		if err != nil {
			return store.HoldResult{}, err
		}
		return store.HoldResult{Outcome: store.Replay, Hold: h, Consumption: c}, nil
	case entitlement.HoldReleased:
		return store.HoldResult{}, store.Errorf(store.CodeConflict, "hold %q was released", h.ID)
	case entitlement.HoldExpired:
		return store.HoldResult{}, store.Wrap(store.CodeConflict, entitlement.ErrHoldExpired, "capture hold %q", h.ID)
	}
	c, ok := b.e.Capture(b.now, &h, ch, uuid.NewString())
	if !ok {
		// Open in its row but not in the entitlement's registry (holds
		// past their expiry were ended above).
		return store.HoldResult{}, store.Errorf(store.CodeInternal, "corrupt data: open hold %s is not on entitlement %s", h.ID, b.e.ID)
	}
	b.holds[h.ID] = h
	b.endedHolds = append(b.endedHolds, h)
	b.addConsumption(c)
	k := keyPair{h.AgentID, h.IdempotencyKey}
	b.used[k] = charge.Used{Hold: h, Consumption: c}
	return store.HoldResult{Outcome: store.Captured, Hold: h, Entitlement: b.shown(), Consumption: c}, nil
}

// capturedConsumption returns the consumption of a hold captured before
// this batch (or earlier in it).
func (b *batch) capturedConsumption(h *entitlement.Hold) (entitlement.Consumption, error) {
	if u, ok := b.used[keyPair{h.AgentID, h.IdempotencyKey}]; ok && u.Consumption.ID == h.ConsumptionID {
		return u.Consumption, nil
	}
	cs, err := consumptionsByID(b.ctx, b.tx, []string{h.ConsumptionID})
	if err != nil {
		return entitlement.Consumption{}, err
	}
	c, ok := cs[h.ConsumptionID]
	if !ok {
		return entitlement.Consumption{}, store.Errorf(store.CodeInternal, "corrupt data: captured hold %s names missing consumption %s", h.ID, h.ConsumptionID)
	}
	return c, nil
}

func (b *batch) release(o *op) (store.HoldResult, error) {
	h, err := b.hold(o)
	if err != nil {
		return store.HoldResult{}, err
	}
	switch h.Status {
	case entitlement.HoldCaptured:
		return store.HoldResult{}, store.Errorf(store.CodeConflict, "hold %q was captured", h.ID)
	case entitlement.HoldReleased, entitlement.HoldExpired:
		return store.HoldResult{Outcome: store.Replay, Hold: h}, nil
	}
	if !b.e.Release(b.now, &h) {
		return store.HoldResult{}, store.Errorf(store.CodeInternal, "corrupt data: open hold %s is not on entitlement %s", h.ID, b.e.ID)
	}
	b.holds[h.ID] = h
	b.endedHolds = append(b.endedHolds, h)
	return store.HoldResult{Outcome: store.Released, Hold: h, Entitlement: b.shown()}, nil
}

// addConsumption records a new consumption, and the events of its charge:
// balance_low when it crossed an alert, depleted when it emptied the
// entitlement.
func (b *batch) addConsumption(c entitlement.Consumption) {
	b.consumptions = append(b.consumptions, c)
	if c.LowBalance || c.Depleted() {
		after := b.shown()
		if c.LowBalance {
			b.events = append(b.events, pending(event.EntitlementBalanceLow, b.e.AgentID, &after))
		}
		if c.Depleted() {
			b.events = append(b.events, pending(event.EntitlementDepleted, b.e.AgentID, &after))
		}
	}
}

// shown is the entitlement as a result shows it now.
func (b *batch) shown() entitlement.Entitlement {
	e := b.e.Clone()
	e.Refresh(b.now)
	return e
}
