package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// Holds: Authorize is charge.Authorize on AuthorizeOne; capture and release
// read the hold once outside a transaction (unless this instance authorized
// it: remembered.go) to learn its entitlement (which never changes) and then
// queue on that entitlement's lane, whose batch takes that read for the hold
// while the entitlement's registry, read in the batch's transaction, still
// holds it open (batch.go). A hold that has ended is answered from the first
// read: its ending is final.

// Authorize implements store.EntitlementStore.
func (s *Store) Authorize(ctx context.Context, req entitlement.HoldRequest) (store.HoldResult, error) {
	return charge.Authorize(ctx, s.consumeCharger(ctx, &req.ConsumeRequest), req)
}

// AuthorizeOne implements charge.Charger: it queues the call on the
// entitlement's lane and waits for its own result.
func (s *Store) AuthorizeOne(ctx context.Context, req *entitlement.HoldRequest, entitlementID string) (store.HoldResult, error) {
	o := s.queue(entitlementID, &call{ctx: ctx, op: opAuthorize, hold: req, fingerprint: req.Fingerprint(),
		key: entitlement.ConsumptionKey(req.AgentID, req.IdempotencyKey)})
	if o.err == nil && o.hold.Outcome == store.Held {
		s.holds.put(&o.hold.Hold)
	}
	return o.hold, o.err
}

// GetHold implements store.EntitlementStore.
func (s *Store) GetHold(ctx context.Context, id string) (entitlement.Hold, error) {
	k, err := s.readKey(ctx, id, "get hold")
	if err != nil {
		return entitlement.Hold{}, err
	}
	if k.Hold == nil {
		return entitlement.Hold{}, holdNotFound(id)
	}
	h := *k.Hold
	h.Refresh(s.clock())
	return h, nil
}

// CaptureHold implements store.EntitlementStore.
func (s *Store) CaptureHold(ctx context.Context, id, agentID string, amount entitlement.Amount) (store.HoldResult, error) {
	c := &call{ctx: ctx, op: opCapture, key: docID(id), agentID: agentID, amount: amount}
	o, err := s.finishHold(c, func(k *keyDoc) (bool, error) {
		_, done, err := charge.SettleCapture(k, c.key, agentID, amount)
		return done, err
	})
	return o.hold, err
}

// ReleaseHold implements store.EntitlementStore.
func (s *Store) ReleaseHold(ctx context.Context, id, agentID string) (store.HoldResult, error) {
	c := &call{ctx: ctx, op: opRelease, key: docID(id), agentID: agentID}
	o, err := s.finishHold(c, func(k *keyDoc) (bool, error) { return charge.CheckRelease(k, c.key, agentID) })
	return o.hold, err
}

// finishHold runs the capture or release c: with the hold as this instance
// authorized it (s.holds) or else as read now, answering at once when check
// can, and otherwise on the lane of the hold's entitlement.
func (s *Store) finishHold(c *call, check func(*keyDoc) (done bool, err error)) (outcome, error) {
	k, ok := s.holds.get(c.key)
	if !ok {
		var err error
		if k, err = s.readKey(c.ctx, c.key, c.op.what()); err != nil {
			return outcome{}, err
		}
	}
	if done, err := check(&k); err != nil {
		return outcome{}, err
	} else if done { // a replay of an ended hold
		return outcome{hold: store.HoldResult{Outcome: store.Replay, Hold: *k.Hold, Consumption: consumptionOf(&k)}}, nil
	}
	c.pre = &k
	o := s.queue(k.Hold.EntitlementID, c)
	if store.CodeOf(o.err) != store.CodeUnavailable {
		s.holds.forget(c.key) // answered: the hold has ended, or it stays as it was
	}
	return o, o.err
}

// RefundConsumption implements store.EntitlementStore: like a capture, it
// reads the consumption to learn its entitlement and queues on that
// entitlement's lane.
func (s *Store) RefundConsumption(ctx context.Context, id string, amount entitlement.Amount) (store.RefundResult, error) {
	k, err := s.readKey(ctx, id, "refund consumption")
	if err != nil {
		return store.RefundResult{}, err
	}
	f, err := s.fenceOf(ctx)
	if err != nil {
		return store.RefundResult{}, err
	}
	c := &call{ctx: ctx, op: opRefund, key: docID(id), amount: amount, fence: f}
	if _, err := charge.CheckRefund(&k, c.key, amount); err != nil {
		return store.RefundResult{}, err
	}
	o := s.queue(k.Cons.EntitlementID, c)
	return o.refund, o.err
}

// consumptionOf is the consumption of k, or none.
func consumptionOf(k *keyDoc) entitlement.Consumption {
	if k.Cons == nil {
		return entitlement.Consumption{}
	}
	return *k.Cons
}

func holdNotFound(id string) error { return store.Errorf(store.CodeNotFound, "hold %q", id) }

func consumptionNotFound(id string) error {
	return store.Errorf(store.CodeNotFound, "consumption %q", id)
}
