package firestore

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

func (s *Store) entitlementRef(id string) *firestore.DocumentRef {
	return s.doc(colEntitlements, id)
}

// GetEntitlement implements store.EntitlementStore.
// It is exact: open leases are read with it (reads_exact.go).
func (s *Store) GetEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error) {
	e, snap, err := s.storedEntitlement(ctx, id)
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	if err := s.exact(ctx, &e, snap.ReadTime); err != nil {
		return entitlement.Entitlement{}, err
	}
	e.Refresh(s.clock())
	return e, nil
}

// ListEntitlements implements store.EntitlementStore.
func (s *Store) ListEntitlements(ctx context.Context, agentID string, f store.EntitlementFilter, p store.Page) ([]entitlement.Entitlement, string, error) {
	filters := []filter{{"agentId", "==", agentID}}
	if f.Status != "" {
		filters = append(filters, filter{"status", "==", string(f.Status)})
	}
	if f.Type != "" {
		filters = append(filters, filter{"type", "==", string(f.Type)})
	}
	if f.Service != "" {
		filters = append(filters, filter{"scope.service", "in", []string{f.Service, entitlement.AnyService}})
	}
	key := listKey(qEntitlementsByAgent, agentID, string(f.Status), string(f.Type), f.Service)
	now, from := s.clock(), s.exactFrom(ctx)
	return list(ctx, s.build(qEntitlementsByAgent, filters...), key, qEntitlementsByAgent.Order, p,
		func(snap *firestore.DocumentSnapshot) (entitlement.Entitlement, error) {
			e, err := from(snap)
			e.Refresh(now)
			return e, err
		})
}

// exactFrom decodes an entitlement with its open leases folded in, as they
// were at the read (reads_exact.go).
func (s *Store) exactFrom(ctx context.Context) func(*firestore.DocumentSnapshot) (entitlement.Entitlement, error) {
	return func(snap *firestore.DocumentSnapshot) (entitlement.Entitlement, error) {
		e, err := entitlementFrom(snap)
		if err == nil {
			err = s.exact(ctx, &e, snap.ReadTime)
		}
		return e, err
	}
}

// ActiveEntitlements implements charge.Charger: the entitlements as
// stored (the consume path's candidates; checkCharger's are exact).
func (s *Store) ActiveEntitlements(ctx context.Context, agentID string) ([]entitlement.Entitlement, error) {
	return s.activeEntitlements(ctx, agentID, false)
}

// activeEntitlements is ActiveEntitlements, exact if asked.
func (s *Store) activeEntitlements(ctx context.Context, agentID string, exact bool) ([]entitlement.Entitlement, error) {
	snaps, err := direct{ctx, "active entitlements"}.all(s.build(qActiveEntitlements,
		filter{"agentId", "==", agentID}, filter{"status", "==", string(entitlement.StatusActive)}))
	if err != nil {
		return nil, err
	}
	if exact {
		return decodeAll(snaps, s.exactFrom(ctx))
	}
	return decodeAll(snaps, entitlementFrom)
}

// account reads the account agentID from src.
func (s *Store) account(src source, agentID string) (entitlement.Account, error) {
	return load(src, s.doc(colAccounts, agentID), accountFrom, store.Errorf(store.CodeNotFound, "account %q", agentID))
}

// GetAccount implements store.EntitlementStore.
func (s *Store) GetAccount(ctx context.Context, agentID string) (entitlement.Account, error) {
	return s.account(direct{ctx, "get account"}, agentID)
}
