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
func (s *Store) CreateEntitlement(ctx context.Context, e entitlement.Entitlement) (entitlement.Entitlement, error) {
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
	if err := markFence(ctx); err != nil {
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
	e.Subscription.ValidUntil = utcPtr(e.Subscription.ValidUntil)
	e.Limits.Spend.ResetAt = utc(e.Limits.Spend.ResetAt)
	e.Limits.Spend.Anchor = utc(e.Limits.Spend.Anchor)
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

// RevokeEntitlement marks the entitlement revoked, releases its open holds
// and writes an entitlement.revoked event; a revoked one is returned
// unchanged.
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
	r := revocationOf(e, now)
	evs, err := s.newEvents(pending(event.EntitlementRevoked, e.AgentID, &r.next))
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	s.revoke(&r, now)
	s.events.add(evs...)
	return shown(e, now), nil
}

// revocation is the change that revokes an active stored entitlement: next
// is what it becomes (a pending lazy reset applied, no open hold left);
// the holds past their expiry end expired, the others released.
type revocation struct {
	stored            *entitlement.Entitlement
	next              entitlement.Entitlement
	expired, released []string
}

func revocationOf(e *entitlement.Entitlement, now time.Time) revocation {
	next, expired := edit(e, now)
	released := next.ReleaseAll(now)
	next.Refresh(now)
	next.Status, next.RevokedAt = entitlement.StatusRevoked, &now
	return revocation{stored: e, next: next, expired: expired, released: released}
}

// revoke writes r: the entitlement, the end of its holds, and its removal
// from the agent's candidates. Callers hold s.mu.
func (s *Store) revoke(r *revocation, now time.Time) {
	s.commit(r.stored, &r.next, r.expired, now)
	s.endHolds(r.released, entitlement.HoldReleased, now)
	a := s.agents[r.stored.AgentID]
	a.active = slices.DeleteFunc(a.active, func(x *entitlement.Entitlement) bool { return x == r.stored })
}
