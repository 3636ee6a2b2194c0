package memory

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

func entitlementPos(e *entitlement.Entitlement) position { return position{At: e.CreatedAt, ID: e.ID} }

// putEntitlement indexes a new entitlement. Callers hold s.mu.
func (s *Store) putEntitlement(e *entitlement.Entitlement) {
	s.entitlements[e.ID] = e
	a := s.agent(e.AgentID)
	a.entitlements = insertSorted(a.entitlements, e, entitlementPos)
	if e.Status == entitlement.StatusActive {
		a.active = append(a.active, e)
	}
}

// shown returns a copy of e with a pending lazy quota reset applied.
func shown(e *entitlement.Entitlement, now time.Time) entitlement.Entitlement {
	c := e.Clone()
	c.Refresh(now)
	return c
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
