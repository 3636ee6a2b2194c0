package firestore

import (
	"context"
	"slices"

	"cloud.google.com/go/firestore"
	"golang.org/x/sync/errgroup"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
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

// ActiveEntitlements implements charge.Charger: what a call may be
// charged to, as stored (the consume path's candidates; checkCharger's are
// exact).
func (s *Store) ActiveEntitlements(ctx context.Context, agentID string) (charge.Pool, error) {
	p, _, err := s.pool(ctx, agentID, false)
	return p, err
}

// pool reads what a call of agentID may be charged to: its active
// entitlements and its memberships, and the active entitlements of its
// wallets, exact if asked. With the agent's candidates document
// (candidates.go) every read is by ID. Without it (an account stored
// before it existed), by the queries: the wallets' entitlements need the
// memberships' answer, so a member's call would wait for two rounds of
// queries; instead they are read at once, in the one query of the agent's
// own, for the wallets the agent's last call found (walletsOf), and read
// again after the memberships only if those differ. Every query is sent
// after the call started, so the answer is as fresh as without the guess;
// an agent in no wallet makes two queries, as a member does.
func (s *Store) pool(ctx context.Context, agentID string, exact bool) (p charge.Pool, indexed bool, err error) {
	if p, ok, err := s.indexedPool(ctx, agentID, exact); ok || err != nil {
		return p, ok, err
	}
	p, err = s.queriedPool(ctx, agentID, exact)
	return p, false, err
}

// queriedPool is pool by the queries, without the candidates document.
func (s *Store) queriedPool(ctx context.Context, agentID string, exact bool) (charge.Pool, error) {
	var (
		g  errgroup.Group
		ms []entitlement.Membership
	)
	guess := s.walletsOf.get(agentID)
	g.Go(func() (err error) {
		ms, err = s.memberships(ctx, agentID)
		return err
	})
	es, err := s.walletEntitlements(ctx, exact, append([]string{agentID}, guess...))
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return charge.Pool{}, err
	}
	wallets := make([]string, len(ms))
	for i := range ms {
		wallets[i] = ms[i].WalletID
	}
	s.walletsOf.put(agentID, wallets)
	if !slices.Equal(wallets, guess) {
		es = slices.DeleteFunc(es, func(e entitlement.Entitlement) bool { return e.AgentID != agentID })
		more, err := s.walletEntitlements(ctx, exact, wallets)
		if err != nil {
			return charge.Pool{}, err
		}
		es = append(es, more...)
	}
	return charge.Pool{Entitlements: es, Members: ms}, nil
}

// walletEntitlements reads the active entitlements of the accounts ids
// (an agent's, wallets'), 30 at a time (the most an "in" filter takes).
func (s *Store) walletEntitlements(ctx context.Context, exact bool, wallets []string) ([]entitlement.Entitlement, error) {
	var out []entitlement.Entitlement
	for chunk := range slices.Chunk(wallets, 30) {
		es, err := s.activeEntitlements(ctx, exact, chunk...)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	return out, nil
}

// memberships reads every membership of the agent memberID (an agent is a
// member of few wallets).
func (s *Store) memberships(ctx context.Context, memberID string) ([]entitlement.Membership, error) {
	snaps, err := direct{ctx, "memberships"}.all(s.build(qWalletsOfMember, filter{"memberId", "==", memberID}))
	if err != nil {
		return nil, err
	}
	return decodeAll(snaps, membershipFrom)
}

// activeEntitlements reads the active entitlements of the agents (or
// wallets), exact if asked, and notes their owners (members.go).
func (s *Store) activeEntitlements(ctx context.Context, exact bool, agentIDs ...string) ([]entitlement.Entitlement, error) {
	agent := filter{"agentId", "==", agentIDs[0]}
	if len(agentIDs) > 1 {
		agent = filter{"agentId", "in", agentIDs}
	}
	snaps, err := direct{ctx, "active entitlements"}.all(s.build(qActiveEntitlements,
		agent, filter{"status", "==", string(entitlement.StatusActive)}))
	if err != nil {
		return nil, err
	}
	from := entitlementFrom
	if exact {
		from = s.exactFrom(ctx)
	}
	es, err := decodeAll(snaps, from)
	for i := range es {
		s.owners.note(es[i].ID, es[i].AgentID)
	}
	return es, err
}

// account reads the account agentID from src.
func (s *Store) account(src source, agentID string) (entitlement.Account, error) {
	return load(src, s.doc(colAccounts, agentID), accountFrom, store.Errorf(store.CodeNotFound, "account %q", agentID))
}

// GetAccount implements store.EntitlementStore.
func (s *Store) GetAccount(ctx context.Context, agentID string) (entitlement.Account, error) {
	return s.account(direct{ctx, "get account"}, agentID)
}
