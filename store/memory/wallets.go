package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// memberships holds every membership twice over the same record: by wallet
// then member, and by member then wallet, for the two lists and for the
// charge path's read of a caller's wallets. Callers hold s.mu.
type memberships struct {
	byWallet map[string]map[string]*entitlement.Membership
	byMember map[string]map[string]*entitlement.Membership
}

func newMemberships() memberships {
	return memberships{byWallet: map[string]map[string]*entitlement.Membership{}, byMember: map[string]map[string]*entitlement.Membership{}}
}

// get returns the stored membership of memberID in walletID, or nil.
func (ms *memberships) get(walletID, memberID string) *entitlement.Membership {
	return ms.byWallet[walletID][memberID]
}

// put stores a copy of m.
func (ms *memberships) put(m entitlement.Membership) {
	c := m.Clone()
	put := func(idx map[string]map[string]*entitlement.Membership, k1, k2 string) {
		if idx[k1] == nil {
			idx[k1] = map[string]*entitlement.Membership{}
		}
		idx[k1][k2] = &c
	}
	put(ms.byWallet, m.WalletID, m.MemberID)
	put(ms.byMember, m.MemberID, m.WalletID)
}

// remove deletes the membership of memberID in walletID.
func (ms *memberships) remove(walletID, memberID string) {
	delete(ms.byWallet[walletID], memberID)
	delete(ms.byMember[memberID], walletID)
}

func membershipNotFound(walletID, memberID string) error {
	return store.Errorf(store.CodeNotFound, "membership of %q in wallet %q", memberID, walletID)
}

func (t *tx) Membership(walletID, memberID string) (entitlement.Membership, error) {
	if m := t.s.members.get(walletID, memberID); m != nil {
		return m.Clone(), nil
	}
	return entitlement.Membership{}, membershipNotFound(walletID, memberID)
}

func (t *tx) PutMembership(m entitlement.Membership) {
	m = m.Clone()
	t.writes = append(t.writes, func() { t.s.members.put(m) })
}

func (t *tx) DeleteMembership(walletID, memberID string) {
	t.writes = append(t.writes, func() { t.s.members.remove(walletID, memberID) })
}

// ListMembers implements store.Wallets: by member ID.
func (s *Store) ListMembers(_ context.Context, walletID string, p store.Page) ([]entitlement.Membership, string, error) {
	return s.listMemberships(s.members.byWallet, walletID, p, listID("members", walletID), func(m *entitlement.Membership) string { return m.MemberID })
}

// ListWallets implements store.Wallets: by wallet ID.
func (s *Store) ListWallets(_ context.Context, memberID string, p store.Page) ([]entitlement.Membership, string, error) {
	return s.listMemberships(s.members.byMember, memberID, p, listID("wallets", memberID), func(m *entitlement.Membership) string { return m.WalletID })
}

// listMemberships returns the page p of the memberships idx holds under
// owner, ordered by key, each shown as it is now.
func (s *Store) listMemberships(idx map[string]map[string]*entitlement.Membership, owner string, p store.Page, list string, key func(*entitlement.Membership) string) ([]entitlement.Membership, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	rows := make([]*entitlement.Membership, 0, len(idx[owner]))
	for _, m := range idx[owner] {
		rows = append(rows, m)
	}
	return pageOf(rows, p, list, func(m *entitlement.Membership) position { return position{ID: key(m)} }, func(m *entitlement.Membership) entitlement.Membership {
		c := m.Clone()
		c.Refresh(now)
		return c
	})
}
