package postgres

import (
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// The calls of a batch, each applied by the charge engine
// (store/internal/charge) to the entitlement as the batch read it and as
// the calls before it left it. What they write is collected in the batch
// and written by batch.write.

// call applies one call. An error is that call's alone, except an Internal
// one, which fails the batch.
func (b *batch) call(o *op) (opResult, error) {
	events := len(b.Events)
	defer func() {
		for _, ev := range b.Events[events:] {
			b.events = append(b.events, pending(ev.Type, ev.AgentID, ev.Data))
		}
	}()
	switch o.kind {
	case opConsume:
		return opResult{consume: b.consume(o.consume)}, nil
	case opAuthorize:
		return opResult{hold: b.authorize(o.authorize)}, nil
	}
	h, err := b.hold(o)
	if err != nil {
		return opResult{}, err
	}
	r := charge.Record{Hold: &h}
	var res store.HoldResult
	if o.kind == opCapture {
		res, err = b.Capture(&r, o.holdID, o.agentID, o.amount, uuid.NewString())
	} else {
		res, err = b.Release(&r, o.holdID, o.agentID)
	}
	if err != nil || (res.Outcome != store.Captured && res.Outcome != store.Released) {
		return opResult{hold: res}, err
	}
	b.holds[h.ID] = h
	b.endedHolds = append(b.endedHolds, h)
	if r.Cons != nil {
		b.consumptions = append(b.consumptions, *r.Cons)
		b.used[keyPair{h.AgentID, h.IdempotencyKey}] = charge.Used{Hold: h, Consumption: *r.Cons}
	}
	return opResult{hold: res}, nil
}

// record is what the batch knows the key k was used for.
func (b *batch) record(k keyPair) charge.Record {
	u, ok := b.used[k]
	if !ok {
		return charge.Record{}
	}
	var r charge.Record
	if u.Consumption.ID != "" {
		r.Cons = &u.Consumption
	}
	if u.Hold.ID != "" {
		r.Hold = &u.Hold
	}
	return r
}

func (b *batch) consume(req *entitlement.ConsumeRequest) store.ConsumeResult {
	k := keyPair{req.AgentID, req.IdempotencyKey}
	r := b.record(k)
	res := b.Consume(req, &r, uuid.NewString(), req.Fingerprint())
	if res.Outcome == store.Consumed {
		b.used[k] = charge.Used{Consumption: res.Consumption}
		b.consumptions = append(b.consumptions, res.Consumption)
		b.newKeys = append(b.newKeys, newKey{keyPair: k, consumptionID: &res.Consumption.ID})
	}
	return res
}

func (b *batch) authorize(req *entitlement.HoldRequest) store.HoldResult {
	k := keyPair{req.AgentID, req.IdempotencyKey}
	r := b.record(k)
	res := b.Authorize(req, &r, uuid.NewString(), req.Fingerprint())
	if res.Outcome == store.Held {
		h := res.Hold
		b.used[k] = charge.Used{Hold: h}
		b.holds[h.ID] = h
		b.newHolds = append(b.newHolds, h)
		b.newKeys = append(b.newKeys, newKey{keyPair: k, holdID: &h.ID})
	}
	return res
}

// hold returns the hold a capture or release names, or ErrNotFound for an
// unknown hold or another agent's.
func (b *batch) hold(o *op) (entitlement.Hold, error) {
	h, ok := b.holds[o.holdID]
	if !ok || h.AgentID != o.agentID || !b.Found || h.EntitlementID != b.E.ID {
		return entitlement.Hold{}, errHoldNotFound(o.holdID)
	}
	return h, nil
}

// capturedConsumption returns the consumption of a hold captured before
// this batch (or earlier in it): charge.Batch.Consumption.
func (b *batch) capturedConsumption(id string) (entitlement.Consumption, error) {
	for _, u := range b.used {
		if u.Consumption.ID == id {
			return u.Consumption, nil
		}
	}
	cs, err := consumptionsByID(b.ctx, b.tx, []string{id})
	if err != nil {
		return entitlement.Consumption{}, err
	}
	c, ok := cs[id]
	if !ok {
		return entitlement.Consumption{}, store.Errorf(store.CodeInternal, "corrupt data: a captured hold names missing consumption %s", id)
	}
	return c, nil
}
