package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// Holds: Authorize is charge.Authorize on AuthorizeOne; capture and release
// read the hold once outside a transaction to learn its entitlement (which
// never changes) and then queue on that entitlement's lane, where the batch
// reads the hold again. A hold that has ended is answered from that first
// read: its ending is final.

// Authorize implements store.EntitlementStore.
func (s *Store) Authorize(ctx context.Context, req entitlement.HoldRequest) (store.HoldResult, error) {
	return charge.Authorize(ctx, s, req)
}

// AuthorizeOne implements charge.Charger: it queues the call on the
// entitlement's lane and waits for its own result.
func (s *Store) AuthorizeOne(ctx context.Context, req *entitlement.HoldRequest, entitlementID string) (store.HoldResult, error) {
	o := s.queue(entitlementID, &call{ctx: ctx, op: opAuthorize, hold: req, fingerprint: req.Fingerprint(),
		key: entitlement.ConsumptionKey(req.AgentID, req.IdempotencyKey)})
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
	k, err := s.readKey(ctx, id, "capture hold")
	if err != nil {
		return store.HoldResult{}, err
	}
	c := &call{ctx: ctx, op: opCapture, key: docID(id), agentID: agentID, amount: amount}
	if _, done := settleCapture(&k, c); done != nil {
		return done.hold, done.err
	}
	o := s.queue(k.Hold.EntitlementID, c)
	return o.hold, o.err
}

// ReleaseHold implements store.EntitlementStore.
func (s *Store) ReleaseHold(ctx context.Context, id, agentID string) (store.HoldResult, error) {
	k, err := s.readKey(ctx, id, "release hold")
	if err != nil {
		return store.HoldResult{}, err
	}
	c := &call{ctx: ctx, op: opRelease, key: docID(id), agentID: agentID}
	if done := checkRelease(&k, c); done != nil {
		return done.hold, done.err
	}
	o := s.queue(k.Hold.EntitlementID, c)
	return o.hold, o.err
}

// RefundConsumption implements store.EntitlementStore: like a capture, it
// reads the consumption to learn its entitlement and queues on that
// entitlement's lane.
func (s *Store) RefundConsumption(ctx context.Context, id string, amount entitlement.Amount) (store.RefundResult, error) {
	k, err := s.readKey(ctx, id, "refund consumption")
	if err != nil {
		return store.RefundResult{}, err
	}
	c := &call{ctx: ctx, op: opRefund, key: docID(id), amount: amount}
	if _, done := checkRefund(&k, c); done != nil {
		return done.refund, done.err
	}
	o := s.queue(k.Cons.EntitlementID, c)
	return o.refund, o.err
}
