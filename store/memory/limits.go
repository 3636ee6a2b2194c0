package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
)

// UpdateEntitlement implements store.EntitlementUpdater (ops.UpdateEntitlement).
func (s *Store) UpdateEntitlement(ctx context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error) {
	return ops.UpdateEntitlement(ctx, s.unit, id, u)
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

// SetAccountLimits replaces the account-wide limits of agentID's account,
// creating the account if absent (store.EntitlementUpdater).
func (s *Store) SetAccountLimits(_ context.Context, agentID string, l entitlement.AccountLimits) (entitlement.Account, error) {
	if agentID == "" {
		return entitlement.Account{}, store.Errorf(store.CodeInvalid, "agentId: is required")
	}
	if err := l.Validate(); err != nil {
		return entitlement.Account{}, store.Wrap(store.CodeInvalid, err, "account limits")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureAccount(agentID)
	a := s.accounts[agentID]
	a.Limits, a.UpdatedAt = l.Clone(), s.clock()
	if a.Limits.IsZero() {
		a.Limits = entitlement.AccountLimits{}
	}
	return copyAccount(a), nil
}
