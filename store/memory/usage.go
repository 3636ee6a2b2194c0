package memory

import (
	"context"
	"errors"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/usage"
)

// Balance implements store.UsageReader.
func (s *Store) Balance(_ context.Context, agentID string) (entitlement.Balance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var es []entitlement.Entitlement
	if a := s.agents[agentID]; a != nil {
		for _, e := range a.active {
			es = append(es, *e) // BalanceOf refreshes clones, never these
		}
	}
	return entitlement.BalanceOf(agentID, es, s.clock()), nil
}

// Usage implements store.UsageReader: usage.Query.Aggregate over the
// agent's consumptions, then one page of it.
func (s *Store) Usage(_ context.Context, q usage.Query, p store.Page) ([]usage.Bucket, string, error) {
	if err := q.Normalize(); err != nil {
		return nil, "", store.Wrap(store.CodeInvalid, err, "usage query")
	}
	s.mu.Lock()
	var cs []entitlement.Consumption
	if a := s.agents[q.AgentID]; a != nil {
		for _, c := range a.consumptions {
			cs = append(cs, copyConsumption(c))
		}
	}
	s.mu.Unlock()
	keys, buckets := q.Aggregate(cs)
	items, next, err := q.Page(keys, buckets, p.Cursor, p.Size())
	if errors.Is(err, usage.ErrCursor) {
		return nil, "", store.Wrap(store.CodeInvalid, err, "usage cursor")
	}
	return items, next, err
}
