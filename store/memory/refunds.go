package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// GetConsumption returns the consumption, or ErrNotFound.
func (s *Store) GetConsumption(_ context.Context, id string) (entitlement.Consumption, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return found(s.consumptions, id, copyConsumption, store.Errorf(store.CodeNotFound, "consumption %q", id))
}

// RefundConsumption gives amount (nil fields: all that was charged) of the
// consumption back to its entitlement and writes consumption.refunded.
func (s *Store) RefundConsumption(ctx context.Context, id string, amount entitlement.Amount) (store.RefundResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.consumptions[id]
	if c == nil {
		return store.RefundResult{}, store.Errorf(store.CodeNotFound, "consumption %q", id)
	}
	e := s.entitlements[c.EntitlementID]
	b := &charge.Batch{}
	expired := start(b, c.EntitlementID, e, s.clock())
	s.loadMember(b, c.AgentID)
	refunded := copyConsumption(c)
	r := charge.Record{Cons: &refunded}
	res, err := b.Refund(&r, id, amount, func() error { return markFence(ctx) })
	if err != nil {
		return store.RefundResult{}, err // nothing written: a refused refund changes nothing
	}
	if res.Replayed {
		return res, nil
	}
	if err := s.commitBatch(e, b, expired); err != nil {
		return store.RefundResult{}, err
	}
	*c = copyConsumption(r.Cons) // every index holds this record
	return res, nil
}
