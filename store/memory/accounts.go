package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
)

// ensureAccount creates the account agentID if absent. Callers hold s.mu.
func (s *Store) ensureAccount(agentID string) {
	if s.accounts[agentID] == nil {
		now := s.clock()
		s.accounts[agentID] = &entitlement.Account{AgentID: agentID, CreatedAt: now, UpdatedAt: now}
	}
}

// AccountLimits returns the account-wide limits of the agent's account
// (charge.Charger).
func (s *Store) AccountLimits(_ context.Context, agentID string) (entitlement.AccountLimits, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accountLimits(agentID), nil
}

// accountLimits returns the limits of the account agentID, shared with
// stored state (zero without an account). Callers hold s.mu.
func (s *Store) accountLimits(agentID string) entitlement.AccountLimits {
	if a := s.accounts[agentID]; a != nil {
		return a.Limits
	}
	return entitlement.AccountLimits{}
}
