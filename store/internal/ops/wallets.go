package ops

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// This file holds the memberships of shared wallets off the hot path: add,
// change, remove and read a member (entitlement/wallet.go has the rules),
// and the end of members' holds when a wallet's entitlement is revoked.

// AddMember is store.Wallets.AddMember.
func (o Shared) AddMember(ctx context.Context, m entitlement.Membership) (entitlement.Membership, error) {
	probe := m
	if probe.Order == "" {
		probe.Order = entitlement.OrderOwnFirst
	}
	if err := probe.Validate(); err != nil {
		return entitlement.Membership{}, store.Wrap(store.CodeInvalid, err, "membership")
	}
	var out entitlement.Membership
	err := o.run(ctx, "add member", func(tx unit.Tx) error {
		if err := checkWallet(tx, m.WalletID); err != nil {
			return err
		}
		member, err := tx.Account(m.MemberID)
		switch {
		case err == nil && member.IsWallet():
			return store.Wrap(store.CodeInvalid, &field.Error{Field: "memberId", Reason: "is a wallet: a wallet cannot be a member"}, "membership")
		case errors.Is(err, store.ErrNotFound):
			if err := tx.EnsureAccount(m.MemberID); err != nil {
				return err
			}
		case err != nil:
			return err
		}
		if _, err := tx.Membership(m.WalletID, m.MemberID); !errors.Is(err, store.ErrNotFound) {
			return found(err, store.CodeConflict, "%s is a member of wallet %q already", m.MemberID, m.WalletID)
		}
		now := tx.Now()
		out = m.Clone()
		if err := out.Start(now); err != nil {
			return store.Wrap(store.CodeInvalid, err, "membership")
		}
		if err := addEvents(tx, now, ev(event.WalletMemberAdded, out.WalletID, out.Clone())); err != nil {
			return err
		}
		if err := tx.Fence(); err != nil {
			return err
		}
		tx.PutMembership(out.Clone())
		return nil
	})
	if err != nil {
		return entitlement.Membership{}, err
	}
	return out, nil
}

// checkWallet answers NotFound (naming walletId) unless the account
// walletID exists and is a wallet.
func checkWallet(tx unit.Tx, walletID string) error {
	w, err := tx.Account(walletID)
	if err == nil && !w.IsWallet() {
		err = store.ErrNotFound
	}
	if errors.Is(err, store.ErrNotFound) {
		return store.Wrap(store.CodeNotFound, &field.Error{Field: "walletId", Reason: "names no wallet"}, "wallet %q", walletID)
	}
	return err
}

// UpdateMember is store.Wallets.UpdateMember.
func (o Shared) UpdateMember(ctx context.Context, walletID, memberID string, u store.MemberUpdate) (entitlement.Membership, error) {
	return o.changeMember(ctx, "update member", walletID, memberID, func(tx unit.Tx, m *entitlement.Membership, now time.Time) error {
		if err := m.Apply(u.Order, u.Caps, now); err != nil {
			return store.Wrap(store.CodeInvalid, err, "membership")
		}
		if err := addEvents(tx, now, ev(event.WalletMemberUpdated, m.WalletID, m.Clone())); err != nil {
			return err
		}
		tx.PutMembership(m.Clone())
		return nil
	})
}

// RemoveMember is store.Wallets.RemoveMember.
func (o Shared) RemoveMember(ctx context.Context, walletID, memberID string) (entitlement.Membership, error) {
	return o.changeMember(ctx, "remove member", walletID, memberID, func(tx unit.Tx, m *entitlement.Membership, now time.Time) error {
		m.Refresh(now)
		if err := addEvents(tx, now, ev(event.WalletMemberRemoved, m.WalletID, m.Clone())); err != nil {
			return err
		}
		tx.DeleteMembership(walletID, memberID)
		return nil
	})
}

// changeMember runs change on the membership of memberID in walletID, read
// for a change of it, at the unit's now, once the unit's fence holds, and
// answers it as change left it.
func (o Shared) changeMember(ctx context.Context, what, walletID, memberID string, change func(tx unit.Tx, m *entitlement.Membership, now time.Time) error) (out entitlement.Membership, err error) {
	err = o.run(ctx, what, func(tx unit.Tx) error {
		m, err := tx.Membership(walletID, memberID)
		if err != nil {
			return err
		}
		now := tx.Now()
		if err := change(tx, &m, now); err != nil {
			return err
		}
		if err := tx.Fence(); err != nil {
			return err
		}
		out = m
		return nil
	})
	return out, err
}

// GetMember is store.Wallets.GetMember: the membership as it is now (the
// period's lazy reset shown applied, expired holds left out).
func (o Shared) GetMember(ctx context.Context, walletID, memberID string) (entitlement.Membership, error) {
	return get(ctx, o, "get member", walletID, func(tx unit.Tx, walletID string) (entitlement.Membership, error) {
		m, err := tx.Membership(walletID, memberID)
		if err == nil {
			m.Refresh(tx.Now())
		}
		return m, err
	})
}

// endMemberHolds ends, on their members' caps, the holds of members among
// open (the open holds of the wallet's entitlement, before a revoke released
// them): what they reserved stops counting at once. A member removed since
// has nothing to end. Memberships are read in member order, so two revokes
// lock them in one order.
func endMemberHolds(tx unit.Tx, walletID string, open []entitlement.OpenHold, now time.Time) error {
	byMember := map[string][]string{}
	for _, h := range open {
		if h.MemberID != "" {
			byMember[h.MemberID] = append(byMember[h.MemberID], h.ID)
		}
	}
	members := make([]string, 0, len(byMember))
	for id := range byMember {
		members = append(members, id)
	}
	slices.Sort(members)
	for _, id := range members {
		m, err := tx.Membership(walletID, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		changed := m.Refresh(now)
		for _, h := range byMember[id] {
			changed = m.EndHold(now, h) || changed
		}
		if changed {
			tx.PutMembership(m)
		}
	}
	return nil
}
