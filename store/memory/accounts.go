package memory

import (
	"context"
	"maps"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// UpsertAccount creates or updates an account; CreatedAt is kept.
func (s *Store) UpsertAccount(_ context.Context, a entitlement.Account) (entitlement.Account, error) {
	if a.AgentID == "" {
		return entitlement.Account{}, store.Errorf(store.CodeInvalid, "agentId: is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	stored := s.accounts[a.AgentID]
	if stored == nil {
		stored = &entitlement.Account{AgentID: a.AgentID, CreatedAt: now}
		s.accounts[a.AgentID] = stored
	} else if stored.DisplayName == a.DisplayName && maps.Equal(stored.Metadata, a.Metadata) {
		return copyAccount(stored), nil // nothing changes, not even UpdatedAt
	}
	stored.DisplayName = a.DisplayName
	stored.Metadata = maps.Clone(a.Metadata)
	stored.UpdatedAt = now
	return copyAccount(stored), nil
}

// GetAccount returns the account, or ErrNotFound.
func (s *Store) GetAccount(_ context.Context, agentID string) (entitlement.Account, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[agentID]
	if a == nil {
		return entitlement.Account{}, store.Errorf(store.CodeNotFound, "account %q", agentID)
	}
	return copyAccount(a), nil
}

// ensureAccount creates the account agentID if absent. Callers hold s.mu.
func (s *Store) ensureAccount(agentID string) {
	if s.accounts[agentID] == nil {
		now := s.clock()
		s.accounts[agentID] = &entitlement.Account{AgentID: agentID, CreatedAt: now, UpdatedAt: now}
	}
}
