package conformance

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// walletTests are the cases of store.Wallets: memberships and their bad
// input, accounts' kinds (this file); charges of members (wallets_charge.go).
var walletTests = []subtest{
	{"WalletAccountKind", walletAccountKind},
	{"WalletMembers", walletMembers},
	{"WalletMembersBadInput", walletMembersBadInput},
	{"WalletMemberUpdateBadInput", walletMemberUpdateBadInput},
}

// newWallet creates a wallet account and returns its ID.
func newWallet(t *testing.T, s store.EntitlementStore) string {
	t.Helper()
	id := "wallet-" + newAgent()
	a := must(s.UpsertAccount(t.Context(), entitlement.Account{AgentID: id, Kind: entitlement.KindWallet}))(t, "UpsertAccount(wallet %s)", id)
	if !a.IsWallet() {
		t.Fatalf("UpsertAccount(wallet %s) = kind %q, want wallet", id, a.Kind)
	}
	return id
}

// walletWithCredits creates a wallet holding credits of cents USD.
func walletWithCredits(t *testing.T, s store.EntitlementStore, cents int64, now time.Time) (string, entitlement.Entitlement) {
	t.Helper()
	w := newWallet(t, s)
	return w, createEntitlement(t, s, credits(w, cents, now))
}

// walletWithMember makes a wallet with 10,000 cents USD of credits and one
// new member with caps, and answers the wallet, its entitlement and the
// member.
func walletWithMember(t *testing.T, s store.EntitlementStore, now time.Time, caps entitlement.Limits) (w string, e entitlement.Entitlement, member string) {
	t.Helper()
	w, e = walletWithCredits(t, s, 10_000, now)
	member = newAgent()
	addMember(t, s, w, member, "", caps)
	return w, e, member
}

// addMember adds memberID to walletID with order and caps, failing the test on error.
func addMember(t *testing.T, s store.EntitlementStore, walletID, memberID string, order entitlement.Order, caps entitlement.Limits) entitlement.Membership {
	t.Helper()
	return must(s.AddMember(t.Context(), entitlement.Membership{WalletID: walletID, MemberID: memberID, Order: order, Caps: caps}))(t,
		"AddMember(%s to %s)", memberID, walletID)
}

// dailyCap is caps of at most cents USD a day.
func dailyCap(cents int64) entitlement.Limits {
	return entitlement.Limits{Spend: entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: usd(cents)}}
}

// getMember reads a membership, failing the test on error.
func getMember(t *testing.T, s store.EntitlementStore, walletID, memberID string) entitlement.Membership {
	t.Helper()
	return must(s.GetMember(t.Context(), walletID, memberID))(t, "GetMember(%s in %s)", memberID, walletID)
}

// walletEvents returns the pending events of type typ about walletID.
func walletEvents(t *testing.T, s store.EntitlementStore, walletID string, typ event.Type) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range pendingEvents(t, s) {
		if e.Type == typ && e.AgentID == walletID {
			out = append(out, eventData(t, e))
		}
	}
	return out
}

// ignoreMembershipCounters leaves out what a membership shows of the spend
// so far (its period's anchor and reset included), for comparisons of
// what an admin set.
var ignoreMembershipCounters = cmpopts.IgnoreFields(entitlement.SpendLimit{}, "Spent", "SpentUnits", "ResetAt", "Anchor")

func walletAccountKind(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w := newWallet(t, s)
	a, err := s.UpsertAccount(ctx, entitlement.Account{AgentID: w, DisplayName: "team"})
	if err != nil || !a.IsWallet() || a.DisplayName != "team" {
		t.Errorf("UpsertAccount(wallet, no kind) = %+v, %v; want the wallet kept, renamed", a, err)
	}
	_, err = s.UpsertAccount(ctx, entitlement.Account{AgentID: w, Kind: entitlement.KindAgent})
	wantField(t, "UpsertAccount(wallet as agent)", err, store.CodeConflict, "kind")
	if got := must(s.GetAccount(ctx, w))(t, "GetAccount(%s)", w); !got.IsWallet() || got.DisplayName != "team" {
		t.Errorf("GetAccount(wallet) after a refused change = %+v, want the wallet named team", got)
	}

	agent, _ := agentWithCredits(t, s, 100, clock.Now()) // its account exists, an agent's
	_, err = s.UpsertAccount(ctx, entitlement.Account{AgentID: agent, Kind: entitlement.KindWallet})
	wantField(t, "UpsertAccount(agent as wallet)", err, store.CodeConflict, "kind")
	if a, err := s.UpsertAccount(ctx, entitlement.Account{AgentID: agent, Kind: entitlement.KindAgent}); err != nil || a.IsWallet() {
		t.Errorf("UpsertAccount(agent, kind agent) = %+v, %v; want the agent", a, err)
	}
	_, err = s.UpsertAccount(ctx, entitlement.Account{AgentID: newAgent(), Kind: "team"})
	wantField(t, "UpsertAccount(kind team)", err, store.CodeInvalid, "kind")

	// A wallet never calls.
	createEntitlement(t, s, credits(w, 1000, clock.Now()))
	_, err = s.CheckAndConsume(ctx, request(w, "k1", 10))
	wantField(t, "CheckAndConsume(by a wallet)", err, store.CodeInvalid, "agentId")
	_, err = s.Check(ctx, request(w, "k1", 10))
	wantField(t, "Check(by a wallet)", err, store.CodeInvalid, "agentId")
	_, err = s.Authorize(ctx, holdRequest(w, "k1", 10))
	wantField(t, "Authorize(by a wallet)", err, store.CodeInvalid, "agentId")
	wantNoConsumptions(t, s, w, "calls by a wallet")
}

func walletMembers(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w := newWallet(t, s)
	now := clock.Now()
	members := []string{"m-b-" + newAgent(), "m-a-" + newAgent(), "m-c-" + newAgent()}
	caps := entitlement.Limits{MaxPerCall: ptr(usd(50)), Spend: entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: usd(500), MaxUnits: 20}}
	added := addMember(t, s, w, members[0], "", caps)
	want := entitlement.Membership{WalletID: w, MemberID: members[0], Order: entitlement.OrderOwnFirst, Caps: caps, CreatedAt: now, UpdatedAt: now}
	want.Caps.Spend.Spent, want.Caps.Spend.Anchor, want.Caps.Spend.ResetAt = usd(0), now, now.Add(24*time.Hour)
	if d := cmpDiff(want, added); d != "" {
		t.Errorf("AddMember mismatch (-want +got):\n%s", d)
	}
	if d := cmpDiff(want, getMember(t, s, w, members[0])); d != "" {
		t.Errorf("GetMember after AddMember mismatch (-want +got):\n%s", d)
	}
	if a, err := s.GetAccount(ctx, members[0]); err != nil || a.IsWallet() {
		t.Errorf("GetAccount(new member) = %+v, %v; want an agent's account, created", a, err)
	}
	_, err := s.AddMember(ctx, entitlement.Membership{WalletID: w, MemberID: members[0]})
	wantCode(t, "AddMember(again)", err, store.CodeConflict)

	clock.Advance(time.Second)
	addMember(t, s, w, members[1], entitlement.OrderWalletFirst, entitlement.Limits{})
	addMember(t, s, w, members[2], "", entitlement.Limits{})
	other := newWallet(t, s)
	addMember(t, s, other, members[0], "", entitlement.Limits{})

	listed, pages := allPages(t, "ListMembers", 2, 5, func(p store.Page) ([]entitlement.Membership, string, error) {
		return s.ListMembers(ctx, w, p)
	})
	if got := memberIDs(listed); pages != 2 || !equalStrings(got, []string{members[1], members[0], members[2]}) {
		t.Errorf("ListMembers(%s) in pages of 2 = %v in %d pages; want %v, %v, %v in 2", w, got, pages, members[1], members[0], members[2])
	}
	wallets, _ := allPages(t, "ListWallets", 1, 5, func(p store.Page) ([]entitlement.Membership, string, error) {
		return s.ListWallets(ctx, members[0], p)
	})
	if len(wallets) != 2 || wallets[0].WalletID > wallets[1].WalletID || (wallets[0].WalletID != w && wallets[1].WalletID != w) {
		t.Errorf("ListWallets(%s) = %+v, want its two memberships by wallet ID", members[0], wallets)
	}
	if got, next, err := s.ListMembers(ctx, newWallet(t, s), store.Page{}); err != nil || len(got) != 0 || next != "" {
		t.Errorf("ListMembers(a wallet with none) = %v, %q, %v; want an empty page", got, next, err)
	}

	clock.Advance(time.Second)
	order, newCaps := entitlement.OrderWalletFirst, dailyCap(800)
	updated := must(s.UpdateMember(ctx, w, members[0], store.MemberUpdate{Order: &order, Caps: &newCaps}))(t, "UpdateMember")
	if updated.Order != order || updated.Caps.Spend.Max != usd(800) || updated.Caps.MaxPerCall != nil || !updated.UpdatedAt.Equal(clock.Now()) || !updated.CreatedAt.Equal(now) {
		t.Errorf("UpdateMember = %+v, want wallet_first, 800 a day, updated now", updated)
	}
	if got := getMember(t, s, w, members[0]); got.Order != order || got.Caps.Spend.Max != usd(800) {
		t.Errorf("GetMember after UpdateMember = %+v", got)
	}
	removed := must(s.RemoveMember(ctx, w, members[0]))(t, "RemoveMember")
	if removed.MemberID != members[0] || removed.Order != order {
		t.Errorf("RemoveMember = %+v, want the membership as it was", removed)
	}
	_, err = s.GetMember(ctx, w, members[0])
	wantCode(t, "GetMember(removed)", err, store.CodeNotFound)
	_, err = s.RemoveMember(ctx, w, members[0])
	wantCode(t, "RemoveMember(again)", err, store.CodeNotFound)

	for typ, n := range map[event.Type]int{event.WalletMemberAdded: 3, event.WalletMemberUpdated: 1, event.WalletMemberRemoved: 1} {
		evs := walletEvents(t, s, w, typ)
		if len(evs) != n {
			t.Errorf("%s events of %s = %d, want %d", typ, w, len(evs), n)
			continue
		}
		if evs[0]["walletId"] != w || evs[0]["memberId"] == nil {
			t.Errorf("%s data = %v, want the membership", typ, evs[0])
		}
	}
}

func memberIDs(ms []entitlement.Membership) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.MemberID
	}
	return out
}

func equalStrings(a, b []string) bool { return cmpDiff(a, b) == "" }

func walletMembersBadInput(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w := newWallet(t, s)
	otherWallet := newWallet(t, s)
	agent, _ := agentWithCredits(t, s, 100, clock.Now())
	fresh := newAgent() // never created: a refused AddMember must not create it
	tests := []struct {
		name  string
		m     entitlement.Membership
		code  store.Code
		field string
	}{
		{"UnknownWallet", entitlement.Membership{WalletID: "no-such-wallet", MemberID: fresh}, store.CodeNotFound, "walletId"},
		{"AgentAsWallet", entitlement.Membership{WalletID: agent, MemberID: fresh}, store.CodeNotFound, "walletId"},
		{"WalletAsMember", entitlement.Membership{WalletID: w, MemberID: otherWallet}, store.CodeInvalid, "memberId"},
		{"MemberIsWallet", entitlement.Membership{WalletID: w, MemberID: w}, store.CodeInvalid, "memberId"},
		{"NoMember", entitlement.Membership{WalletID: w}, store.CodeInvalid, "memberId"},
		{"NegativeMaxPerCall", entitlement.Membership{WalletID: w, MemberID: fresh, Caps: entitlement.Limits{MaxPerCall: ptr(usd(-5))}}, store.CodeInvalid, "caps.maxPerCall.cents"},
		{"NegativeSpend", entitlement.Membership{WalletID: w, MemberID: fresh, Caps: dailyCap(-5)}, store.CodeInvalid, "caps.spendLimit.max.cents"},
		{"NegativeUnits", entitlement.Membership{WalletID: w, MemberID: fresh, Caps: entitlement.Limits{Spend: entitlement.SpendLimit{Period: entitlement.PeriodDay, MaxUnits: -1}}}, store.CodeInvalid, "caps.spendLimit.maxUnits"},
		{"NoPeriod", entitlement.Membership{WalletID: w, MemberID: fresh, Caps: entitlement.Limits{Spend: entitlement.SpendLimit{Max: usd(5)}}}, store.CodeInvalid, "caps.spendLimit.period"},
		{"TwoCurrencies", entitlement.Membership{WalletID: w, MemberID: fresh, Caps: entitlement.Limits{MaxPerCall: &money.Money{Cents: 5, Currency: "EUR"}, Spend: dailyCap(10).Spend}}, store.CodeInvalid, "caps.spendLimit.max.currency"},
		{"BadOrder", entitlement.Membership{WalletID: w, MemberID: fresh, Order: "last"}, store.CodeInvalid, "order"},
	}
	before := len(pendingEvents(t, s))
	for _, tt := range tests {
		_, err := s.AddMember(ctx, tt.m)
		wantField(t, "AddMember("+tt.name+")", err, tt.code, tt.field)
	}
	if got, _, err := s.ListMembers(ctx, w, store.Page{}); err != nil || len(got) != 0 {
		t.Errorf("ListMembers after refused adds = %+v, %v; want none", got, err)
	}
	if got, _, err := s.ListWallets(ctx, otherWallet, store.Page{}); err != nil || len(got) != 0 {
		t.Errorf("ListWallets(a wallet) after refused adds = %+v, %v; want none", got, err)
	}
	_, err := s.GetAccount(ctx, fresh)
	wantCode(t, "GetAccount(member of refused adds)", err, store.CodeNotFound)
	if after := len(pendingEvents(t, s)); after != before {
		t.Errorf("refused adds wrote %d events, want none", after-before)
	}
}

func walletMemberUpdateBadInput(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w, e, member := walletWithMember(t, s, clock.Now(), dailyCap(500))
	mustConsume(t, s, request(member, "k1", 200))
	before := getMember(t, s, w, member)

	bad := entitlement.Order("sideways")
	_, err := s.UpdateMember(ctx, w, member, store.MemberUpdate{Order: &bad})
	wantField(t, "UpdateMember(bad order)", err, store.CodeInvalid, "order")
	negative := dailyCap(-1)
	_, err = s.UpdateMember(ctx, w, member, store.MemberUpdate{Caps: &negative})
	wantField(t, "UpdateMember(negative caps)", err, store.CodeInvalid, "caps.spendLimit.max.cents")
	_, err = s.UpdateMember(ctx, w, newAgent(), store.MemberUpdate{Order: &bad})
	wantCode(t, "UpdateMember(no such member)", err, store.CodeNotFound)
	if d := cmpDiff(before, getMember(t, s, w, member)); d != "" {
		t.Errorf("membership after refused updates changed (-before +after):\n%s", d)
	}

	// A new most in the same period keeps what was spent; a new period
	// starts from nothing.
	more := dailyCap(1000)
	got := must(s.UpdateMember(ctx, w, member, store.MemberUpdate{Caps: &more}))(t, "UpdateMember(1000 a day)")
	if got.Caps.Spend.Spent != usd(200) {
		t.Errorf("UpdateMember(same period) spent = %v, want 200 USD kept", got.Caps.Spend.Spent)
	}
	weekly := entitlement.Limits{Spend: entitlement.SpendLimit{Period: entitlement.PeriodWeek, Max: usd(1000)}}
	got = must(s.UpdateMember(ctx, w, member, store.MemberUpdate{Caps: &weekly}))(t, "UpdateMember(weekly)")
	if got.Caps.Spend.Spent != usd(0) {
		t.Errorf("UpdateMember(new period) spent = %v, want 0 USD", got.Caps.Spend.Spent)
	}
	if e := getEntitlement(t, s, e.ID); e.Credits.Balance != usd(9800) {
		t.Errorf("wallet balance = %v, want 9800 USD", e.Credits.Balance)
	}
}
