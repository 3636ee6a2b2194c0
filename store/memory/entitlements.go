package memory

import (
	"context"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

func entitlementPos(e *entitlement.Entitlement) position { return position{e.CreatedAt, e.ID} }

// CreateEntitlement stores e, creates its account if absent and writes an
// entitlement.granted event.
func (s *Store) CreateEntitlement(_ context.Context, e entitlement.Entitlement) (entitlement.Entitlement, error) {
	if err := e.Validate(); err != nil {
		return entitlement.Entitlement{}, store.Wrap(store.CodeInvalid, err, "entitlement")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.entitlements[e.ID]; ok {
		return entitlement.Entitlement{}, store.Errorf(store.CodeConflict, "entitlement %q exists", e.ID)
	}
	if e.Status == "" {
		e.Status = entitlement.StatusActive
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.clock()
	}
	stored := e.Clone()
	normalizeTimes(&stored)
	evs, err := s.newEvents(pending(event.EntitlementGranted, e.AgentID, &stored))
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	s.ensureAccount(e.AgentID)
	s.putEntitlement(&stored)
	s.events.add(evs...)
	return stored.Clone(), nil
}

// putEntitlement indexes a new entitlement. Callers hold s.mu.
func (s *Store) putEntitlement(e *entitlement.Entitlement) {
	s.entitlements[e.ID] = e
	a := s.agent(e.AgentID)
	a.entitlements = insertSorted(a.entitlements, e, byPosition(entitlementPos))
	if e.Status == entitlement.StatusActive {
		a.active = append(a.active, e)
	}
}

// normalizeTimes stores every instant of e in UTC.
func normalizeTimes(e *entitlement.Entitlement) {
	e.CreatedAt = utc(e.CreatedAt)
	e.ExpiresAt = utcPtr(e.ExpiresAt)
	e.RevokedAt = utcPtr(e.RevokedAt)
	e.Quota.ResetAt = utc(e.Quota.ResetAt)
	e.Quota.Anchor = utc(e.Quota.Anchor)
	e.Subscription.ValidFrom = utc(e.Subscription.ValidFrom)
	e.Subscription.ValidUntil = utc(e.Subscription.ValidUntil)
}

// shown returns a copy of e with a pending lazy quota reset applied.
func shown(e *entitlement.Entitlement, now time.Time) entitlement.Entitlement {
	c := e.Clone()
	c.Refresh(now)
	return c
}

// GetEntitlement returns the entitlement, or ErrNotFound.
func (s *Store) GetEntitlement(_ context.Context, id string) (entitlement.Entitlement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entitlements[id]
	if e == nil {
		return entitlement.Entitlement{}, store.Errorf(store.CodeNotFound, "entitlement %q", id)
	}
	return shown(e, s.clock()), nil
}

// ListEntitlements lists an agent's entitlements, oldest first.
func (s *Store) ListEntitlements(_ context.Context, agentID string, f store.EntitlementFilter, p store.Page) ([]entitlement.Entitlement, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []*entitlement.Entitlement
	if a := s.agents[agentID]; a != nil {
		rows = a.entitlements
	}
	now := s.clock()
	keep := func(e *entitlement.Entitlement) bool {
		return (f.Status == "" || e.Status == f.Status) &&
			(f.Type == "" || e.Type == f.Type) &&
			(f.Service == "" || e.Scope.Service == f.Service || e.Scope.Service == entitlement.AnyService)
	}
	list := listID("entitlements", agentID, string(f.Status), string(f.Type), f.Service)
	return paginate(rows, p, list, entitlementPos, keep, func(e *entitlement.Entitlement) entitlement.Entitlement { return shown(e, now) })
}

// RevokeEntitlement marks the entitlement revoked and writes an
// entitlement.revoked event; a revoked one is returned unchanged.
func (s *Store) RevokeEntitlement(_ context.Context, id string) (entitlement.Entitlement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entitlements[id]
	if e == nil {
		return entitlement.Entitlement{}, store.Errorf(store.CodeNotFound, "entitlement %q", id)
	}
	now := s.clock()
	if e.Status == entitlement.StatusRevoked {
		return shown(e, now), nil
	}
	left := shown(e, now)
	left.Status, left.RevokedAt = entitlement.StatusRevoked, &now
	evs, err := s.newEvents(pending(event.EntitlementRevoked, e.AgentID, &left))
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	s.markRevoked(e, now)
	s.events.add(evs...)
	return shown(e, now), nil
}

// markRevoked marks the active e revoked at now, applying a pending lazy
// reset. Callers hold s.mu.
func (s *Store) markRevoked(e *entitlement.Entitlement, now time.Time) {
	e.Refresh(now)
	e.Status, e.RevokedAt = entitlement.StatusRevoked, &now
	a := s.agents[e.AgentID]
	a.active = slices.DeleteFunc(a.active, func(x *entitlement.Entitlement) bool { return x == e })
}
