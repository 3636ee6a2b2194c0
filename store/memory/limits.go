package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// UpdateEntitlement applies u to the entitlement id (store.EntitlementUpdater).
func (s *Store) UpdateEntitlement(_ context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entitlements[id]
	if e == nil {
		return entitlement.Entitlement{}, store.Errorf(store.CodeNotFound, "entitlement %q", id)
	}
	now := s.clock()
	next, expired := edit(e, now)
	if err := next.Apply(u, now); err != nil {
		return entitlement.Entitlement{}, store.Wrap(store.CodeInvalid, err, "update of entitlement %q", id)
	}
	normalizeTimes(&next)
	s.commit(e, &next, expired, now)
	return shown(e, now), nil
}
