package memory

import (
	"context"
	"errors"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// GetConsumption returns the consumption, or ErrNotFound.
func (s *Store) GetConsumption(_ context.Context, id string) (entitlement.Consumption, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.consumptions[id]
	if c == nil {
		return entitlement.Consumption{}, store.Errorf(store.CodeNotFound, "consumption %q", id)
	}
	return copyConsumption(c), nil
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
	ch, err := c.RefundCharge(amount)
	if err != nil {
		return store.RefundResult{}, store.Wrap(store.CodeInvalid, err, "refund of consumption %q", id)
	}
	e := s.entitlements[c.EntitlementID]
	now := s.clock()
	if c.Refund != nil {
		if c.Refund.Charge != ch {
			return store.RefundResult{}, store.Wrap(store.CodeConflict, entitlement.ErrRefundRefused, "consumption %q was refunded with another amount", id)
		}
		return store.RefundResult{Consumption: copyConsumption(c), Entitlement: shown(e, now), Replayed: true}, nil
	}
	next, expired := edit(e, now)
	refunded := copyConsumption(c)
	if err := next.Refund(now, &refunded, amount); err != nil {
		if errors.Is(err, entitlement.ErrRefundRefused) {
			return store.RefundResult{}, store.Wrap(store.CodeConflict, err, "refund of consumption %q", id)
		}
		return store.RefundResult{}, store.Wrap(store.CodeInvalid, err, "refund of consumption %q", id)
	}
	evs, err := s.newEvents(pending(event.ConsumptionRefunded, c.AgentID, &refunded))
	if err != nil {
		return store.RefundResult{}, err
	}
	if err := markFence(ctx); err != nil {
		return store.RefundResult{}, err
	}
	s.commit(e, &next, expired, now)
	*c = refunded // every index holds this record
	s.events.add(evs...)
	return store.RefundResult{Consumption: copyConsumption(c), Entitlement: shown(e, now)}, nil
}
