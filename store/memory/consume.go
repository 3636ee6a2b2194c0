package memory

import (
	"context"
	"sort"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

func consumptionPos(c *entitlement.Consumption) position { return position{c.OccurredAt, c.ID} }

// CheckAndConsume charges one tool call, exactly once per (agent, key).
func (s *Store) CheckAndConsume(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	return store.Consume(ctx, s, req)
}

// Check answers what CheckAndConsume would do now, without writing.
func (s *Store) Check(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	return store.CheckOnly(ctx, s, req, s.now().UTC())
}

// FindConsumption returns the consumption of the agent's key, or ErrNotFound.
func (s *Store) FindConsumption(_ context.Context, agentID, key string) (entitlement.Consumption, error) {
	k := consumptionKey{agentID, key}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.consumptions[k]
	if c == nil {
		return entitlement.Consumption{}, store.ErrNotFound
	}
	return copyConsumption(c), nil
}

// ActiveEntitlements returns the agent's active entitlements as stored (lazy
// resets not applied). They are shallow copies: this runs on every consume
// without an entitlement ID, and the parts they share with stored state
// (scope tools, metadata, expiry times) are never changed in place.
func (s *Store) ActiveEntitlements(_ context.Context, agentID string) ([]entitlement.Entitlement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[agentID]
	if a == nil {
		return nil, nil
	}
	out := make([]entitlement.Entitlement, len(a.active))
	for i, e := range a.active {
		out[i] = *e
	}
	return out, nil
}

// ConsumeOne is the atomic step of CheckAndConsume: under the mutex it
// re-checks the key, then charges the one entitlement.
func (s *Store) ConsumeOne(_ context.Context, req *entitlement.ConsumeRequest, entitlementID string) (store.ConsumeResult, error) {
	key := consumptionKey{req.AgentID, req.IdempotencyKey}
	id := s.ids.next()
	s.mu.Lock()
	defer s.mu.Unlock()
	if prior := s.consumptions[key]; prior != nil {
		return store.ReplayOf(copyConsumption(prior), req), nil
	}
	stored := s.entitlements[entitlementID]
	if stored == nil || stored.AgentID != req.AgentID {
		return deniedBy(entitlementID, entitlement.ReasonNotFound), nil
	}
	// Consume changes the stored entitlement in place, under the mutex: only
	// its balance or quota, and on a denial at most a lazy quota reset.
	c, reason := stored.Consume(s.clock(), req, id)
	if reason != "" {
		return deniedBy(entitlementID, reason), nil
	}
	stc := &c
	s.consumptions[key] = stc
	a := s.agents[req.AgentID]
	a.consumptions = insertSorted(a.consumptions, stc, consumptionPos)
	out := &consumed{copyConsumption(stc), copyEntitlement(stored)}
	return store.ConsumeResult{Outcome: store.Consumed, Consumption: &out.c, Entitlement: &out.e}, nil
}

// consumed holds the copies a Consumed result points to, in one allocation.
type consumed struct {
	c entitlement.Consumption
	e entitlement.Entitlement
}

func deniedBy(entitlementID string, reason entitlement.Reason) store.ConsumeResult {
	return store.ConsumeResult{Outcome: store.Denied, Denials: []entitlement.Denial{{EntitlementID: entitlementID, Reason: reason}}}
}

// ListConsumptions lists an agent's consumptions at or after since, oldest first.
func (s *Store) ListConsumptions(_ context.Context, agentID string, since time.Time, p store.Page) ([]entitlement.Consumption, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []*entitlement.Consumption
	if a := s.agents[agentID]; a != nil {
		rows = a.consumptions
	}
	if !since.IsZero() {
		rows = rows[sort.Search(len(rows), func(i int) bool { return !rows[i].OccurredAt.Before(since) }):]
	}
	return paginate(rows, p, consumptionPos, nil, copyConsumption)
}
