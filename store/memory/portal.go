package memory

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/portal"
	"github.com/stipend-mcp/stipend/store"
)

// CreatePortalSession stores a new portal session.
func (s *Store) CreatePortalSession(ctx context.Context, ps portal.Session) (portal.Session, error) {
	ps, err := store.NewPortalSession(ps)
	if err != nil {
		return portal.Session{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.portal[ps.ID]; ok {
		return portal.Session{}, store.Errorf(store.CodeConflict, "portal session %q exists", ps.ID)
	}
	if err := markFence(ctx); err != nil {
		return portal.Session{}, err
	}
	s.portal[ps.ID] = &ps
	return ps.Clone(), nil
}

// GetPortalSession returns a portal session.
func (s *Store) GetPortalSession(_ context.Context, id string) (portal.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return found(s.portal, id, (*portal.Session).Clone, store.Errorf(store.CodeNotFound, "portal session %q", id))
}

// RevokePortalSession revokes a portal session.
func (s *Store) RevokePortalSession(_ context.Context, id string, at time.Time) (portal.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps, ok := s.portal[id]
	if !ok {
		return portal.Session{}, store.Errorf(store.CodeNotFound, "portal session %q", id)
	}
	if ps.RevokedAt == nil {
		at = at.UTC()
		ps.RevokedAt = &at
	}
	return ps.Clone(), nil
}
