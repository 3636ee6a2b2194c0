package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// ensureAccount creates the account agentID if absent. Callers hold s.mu.
func (s *Store) ensureAccount(agentID string) {
	if s.accounts[agentID] == nil {
		now := s.clock()
		s.accounts[agentID] = &entitlement.Account{AgentID: agentID, CreatedAt: now, UpdatedAt: now}
	}
}

// CallerAccount returns the agent's account, the zero account when there
// is none (charge.Charger).
func (s *Store) CallerAccount(_ context.Context, agentID string) (entitlement.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.accounts[agentID]; a != nil {
		return copyAccount(a), nil
	}
	return entitlement.Account{}, nil
}

// refuseCaller is charge.Refuse on the stored account of req's agent.
// Callers hold s.mu.
func (s *Store) refuseCaller(req *entitlement.ConsumeRequest) ([]entitlement.Denial, error) {
	a := s.accounts[req.AgentID]
	if a == nil {
		return nil, nil
	}
	return charge.Refuse(a, req)
}
