package firestore

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
)

// Wallet memberships: their CRUD is store/internal/ops/wallets.go on the
// unit of work (the Tx methods here); the two lists are this adapter's
// queries (queries.go). A member's charges read and write its membership
// in the charge's own transaction: batch.go, lease_charge.go, members.go.

// Membership reads a membership and notes whether it exists: a write of
// one that existed leaves its member's candidates as they are.
func (t *tx) Membership(walletID, memberID string) (entitlement.Membership, error) {
	ref := t.s.membershipRef(walletID, memberID)
	m, err := load(t, ref, membershipFrom, membershipNotFound(walletID, memberID))
	if err == nil || errors.Is(err, store.ErrNotFound) {
		if t.members == nil {
			t.members = map[string]bool{}
		}
		t.members[ref.ID] = err == nil
	}
	return m, err
}

func (t *tx) PutMembership(m entitlement.Membership) {
	ref := t.s.membershipRef(m.WalletID, m.MemberID)
	t.set(ref, membershipDoc(&m))
	if !t.members[ref.ID] {
		t.indexMembership(m.WalletID, m.MemberID, true)
	}
}

func (t *tx) DeleteMembership(walletID, memberID string) {
	ref := t.s.membershipRef(walletID, memberID)
	t.write(func() error { return t.tx.Delete(ref) })
	t.indexMembership(walletID, memberID, false)
}

// membershipNotFound is the error of an absent membership.
func membershipNotFound(walletID, memberID string) error {
	return store.Errorf(store.CodeNotFound, "member %q of wallet %q", memberID, walletID)
}

// ListMembers implements store.Wallets: the wallet's memberships by
// member ID.
func (s *Store) ListMembers(ctx context.Context, walletID string, p store.Page) ([]entitlement.Membership, string, error) {
	return s.listMemberships(ctx, qMembersOfWallet, "walletId", walletID, p, func(m *entitlement.Membership) (string, *firestore.DocumentRef) {
		return m.MemberID, s.membershipRef(walletID, m.MemberID)
	})
}

// ListWallets implements store.Wallets: the agent's memberships by wallet
// ID.
func (s *Store) ListWallets(ctx context.Context, memberID string, p store.Page) ([]entitlement.Membership, string, error) {
	return s.listMemberships(ctx, qWalletsOfMember, "memberId", memberID, p, func(m *entitlement.Membership) (string, *firestore.DocumentRef) {
		return m.WalletID, s.membershipRef(m.WalletID, memberID)
	})
}

// listMemberships runs one page of q (the memberships whose field is id,
// ordered by q.Order, a name unique among them): a cursor holds the last
// item's name (as its document ID's place), from which its document ID
// follows (at).
func (s *Store) listMemberships(ctx context.Context, q Query, field, id string, p store.Page, at func(*entitlement.Membership) (string, *firestore.DocumentRef)) ([]entitlement.Membership, string, error) {
	listID := listKey(q, id)
	after, ok, err := decodeCursor(p.Cursor, listID)
	if err != nil {
		return nil, "", err
	}
	query := s.build(q, filter{field, "==", id})
	if ok {
		name, ref := at(&entitlement.Membership{WalletID: after.DocID, MemberID: after.DocID})
		query = query.StartAfter(name, ref.ID)
	}
	size := p.Size()
	snaps, err := query.Limit(size + 1).Documents(ctx).GetAll()
	if err != nil {
		return nil, "", fsfault.Read(err, "list %s", q.Name)
	}
	ms, err := decodeAll(snaps[:min(len(snaps), size)], membershipFrom)
	if err != nil || len(snaps) <= size {
		return ms, "", err
	}
	name, _ := at(&ms[size-1])
	return ms, encodeCursor(listID, time.Time{}, name), nil
}
