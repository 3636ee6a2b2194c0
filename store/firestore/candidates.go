package firestore

import (
	"context"
	"maps"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"
	"golang.org/x/sync/errgroup"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// A consume naming no entitlement charges one of its agent's candidates:
// the agent's active entitlements and those of the wallets it is a member
// of. Finding them by query (agentId and status; memberId) costs the
// emulator several times a point read, on every call. So each account (an
// agent's or a wallet's) has a candidates document, colCandidates/{id},
// holding the IDs of its active entitlements ("entitlements") and the
// wallets it is a member of ("wallets"), and the consume reads those by ID.
//
// The document is written in the same transaction as every change it
// follows: a grant (CreateEntitlement, on its own or completing a payment),
// a revocation or its reversal (UpdateEntitlement), a membership added or
// removed (PutMembership, DeleteMembership); see indexChanges. It may name
// more than is there (an ID is dropped in the transaction that revokes it,
// but a reader checks each entitlement's status and owner and each
// membership anyway), never less: whatever was committed before a call
// began is in the document the call reads, since point reads are strong.
//
// An account whose document does not exist (stored before the document
// existed, or with nothing ever granted) is read by the queries, as before;
// the first change of the account through this store writes the document
// whole, from the same queries run inside its transaction. A transaction
// that reads the document and one that writes it conflict, so a grant
// committed while another built the document is in it or retried.
//
// Every instance on a database must write the document (a version of
// Stipend from before it would grant without it): see the upgrade note in
// store/firestore/README.md.
const colCandidates = "candidates"

func (s *Store) candidatesRef(accountID string) *firestore.DocumentRef {
	return s.doc(colCandidates, accountID)
}

// candidates is one account's candidates document.
type candidates struct {
	Entitlements []string
	Wallets      []string
}

func candidatesFields(c *candidates) []field {
	return []field{opt(strs("entitlements", &c.Entitlements)), opt(strs("wallets", &c.Wallets))}
}

func candidatesFrom(snap *firestore.DocumentSnapshot) (candidates, error) {
	var c candidates
	f := read(snap)
	f.decode(candidatesFields(&c))
	return c, f.err
}

// indexChange is what a unit changes in one account's candidates.
type indexChange struct {
	add, drop map[string]bool
	// wallets: true joins the wallet, false leaves it.
	wallets map[string]bool
}

// indexEntitlement records that e (as the unit writes it) is a candidate of
// its owner (active) or no longer one.
func (t *tx) indexEntitlement(e *entitlement.Entitlement) {
	c := t.indexChange(e.AgentID)
	delete(c.add, e.ID)
	delete(c.drop, e.ID)
	if e.Status == entitlement.StatusActive {
		c.add[e.ID] = true
	} else {
		c.drop[e.ID] = true
	}
}

// indexMembership records that memberID joins (in) or leaves walletID.
func (t *tx) indexMembership(walletID, memberID string, in bool) {
	t.indexChange(memberID).wallets[walletID] = in
}

func (t *tx) indexChange(accountID string) *indexChange {
	if t.index == nil {
		t.index = map[string]*indexChange{}
	}
	c := t.index[accountID]
	if c == nil {
		c = &indexChange{add: map[string]bool{}, drop: map[string]bool{}, wallets: map[string]bool{}}
		t.index[accountID] = c
	}
	return c
}

// writeIndex reads, in the unit's transaction after every read of the unit
// and before its writes, the candidates documents of the accounts the unit
// changed, and queues each one's new version: the stored one, or, with none
// stored, the one the queries give, with the unit's changes applied.
func (t *tx) writeIndex() error {
	for _, id := range slices.Sorted(maps.Keys(t.index)) {
		ch := t.index[id]
		ref := t.s.candidatesRef(id)
		snap, err := t.tx.Get(ref)
		var c candidates
		switch {
		case err == nil:
			c, err = candidatesFrom(snap)
		case isNotFound(err):
			c, err = t.s.queryCandidates(t, id)
		}
		if err != nil {
			return err
		}
		c.Entitlements = slices.DeleteFunc(c.Entitlements, func(e string) bool { return ch.drop[e] || ch.add[e] })
		c.Entitlements = append(c.Entitlements, slices.Sorted(maps.Keys(ch.add))...)
		c.Wallets = slices.DeleteFunc(c.Wallets, func(w string) bool { _, ok := ch.wallets[w]; return ok })
		for w, in := range ch.wallets {
			if in {
				c.Wallets = append(c.Wallets, w)
			}
		}
		slices.Sort(c.Entitlements)
		slices.Sort(c.Wallets)
		t.set(ref, encode(candidatesFields(&c)))
	}
	return nil
}

// queryCandidates reads the candidates of accountID by the queries, from src.
func (s *Store) queryCandidates(src source, accountID string) (candidates, error) {
	var c candidates
	snaps, err := src.all(s.build(qActiveEntitlements, filter{"agentId", "==", accountID},
		filter{"status", "==", string(entitlement.StatusActive)}))
	if err != nil {
		return c, err
	}
	if c.Entitlements, err = decodeAll(snaps, pointer("id")); err != nil {
		return c, err
	}
	if snaps, err = src.all(s.build(qWalletsOfMember, filter{"memberId", "==", accountID})); err != nil {
		return c, err
	}
	for _, snap := range snaps {
		m, err := membershipFrom(snap)
		if err != nil {
			return c, err
		}
		c.Wallets = append(c.Wallets, m.WalletID)
	}
	return c, nil
}

// indexedPool reads agentID's pool through its candidates document: false
// if it has none (pool queries then). Every read is a point read, sent
// after the call began: the document, then the entitlements it names with
// the memberships and the wallets' documents, then the wallets'
// entitlements.
func (s *Store) indexedPool(ctx context.Context, agentID string, exact bool) (charge.Pool, bool, error) {
	snap, err := s.get(ctx, s.candidatesRef(agentID))
	if err != nil {
		return charge.Pool{}, false, fsfault.Read(err, "read candidates")
	}
	if !snap.Exists() {
		return charge.Pool{}, false, nil
	}
	c, err := candidatesFrom(snap)
	if err != nil {
		return charge.Pool{}, false, err
	}
	refs := make([]*firestore.DocumentRef, 0, len(c.Entitlements)+2*len(c.Wallets))
	for _, id := range c.Entitlements {
		refs = append(refs, s.entitlementRef(id))
	}
	for _, w := range c.Wallets {
		refs = append(refs, s.membershipRef(w, agentID), s.candidatesRef(w))
	}
	snaps, err := s.getAll(ctx, refs)
	if err != nil {
		return charge.Pool{}, false, fsfault.Read(err, "read candidates")
	}
	var pool charge.Pool
	if pool.Entitlements, err = s.owned(ctx, agentID, exact, snaps[:len(c.Entitlements)]); err != nil {
		return charge.Pool{}, false, err
	}
	var (
		g     errgroup.Group
		found = make([][]entitlement.Entitlement, len(c.Wallets))
	)
	for i, w := range c.Wallets {
		m, ws := snaps[len(c.Entitlements)+2*i], snaps[len(c.Entitlements)+2*i+1]
		if !m.Exists() {
			continue // left the wallet
		}
		ms, err := membershipFrom(m)
		if err != nil {
			return charge.Pool{}, false, err
		}
		pool.Members = append(pool.Members, ms)
		g.Go(func() error {
			es, err := s.walletCandidates(ctx, w, ws, exact)
			found[i] = es
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return charge.Pool{}, false, err
	}
	pool.Entitlements = append(pool.Entitlements, slices.Concat(found...)...)
	return pool, true, nil
}

// walletCandidates reads the active entitlements of walletID, whose
// candidates document is snap: by ID, or, with no document, by the query.
func (s *Store) walletCandidates(ctx context.Context, walletID string, snap *firestore.DocumentSnapshot, exact bool) ([]entitlement.Entitlement, error) {
	if !snap.Exists() {
		return s.activeEntitlements(ctx, exact, walletID)
	}
	c, err := candidatesFrom(snap)
	if err != nil || len(c.Entitlements) == 0 {
		return nil, err
	}
	refs := make([]*firestore.DocumentRef, len(c.Entitlements))
	for i, id := range c.Entitlements {
		refs[i] = s.entitlementRef(id)
	}
	snaps, err := s.getAll(ctx, refs)
	if err != nil {
		return nil, fsfault.Read(err, "read wallet candidates")
	}
	return s.owned(ctx, walletID, exact, snaps)
}

// owned decodes the entitlements of snaps that exist, are active and are
// ownerID's (what the query of its active entitlements finds), exact if
// asked, in the query's order (document ID), and notes their owners.
func (s *Store) owned(ctx context.Context, ownerID string, exact bool, snaps []*firestore.DocumentSnapshot) ([]entitlement.Entitlement, error) {
	from := entitlementFrom
	if exact {
		from = s.exactFrom(ctx)
	}
	var es []entitlement.Entitlement
	for _, snap := range snaps {
		if !snap.Exists() {
			continue
		}
		e, err := from(snap)
		if err != nil {
			return nil, err
		}
		if e.Status != entitlement.StatusActive || e.AgentID != ownerID {
			continue
		}
		s.owners.note(e.ID, e.AgentID)
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b entitlement.Entitlement) int { return strings.Compare(docID(a.ID), docID(b.ID)) })
	return es, nil
}
