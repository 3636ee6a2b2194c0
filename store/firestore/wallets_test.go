package firestore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
	"github.com/stipend-mcp/stipend/usage"
)

// walletStores returns n instances on one fresh collection prefix whose
// leases may hold up to 100,000 cents, so a wallet's hot entitlement is
// charged on leases.
func walletStores(t *testing.T, n int) []*fsstore.Store {
	t.Helper()
	prefix := emulator.Prefix(t)
	out := make([]*fsstore.Store, n)
	for i := range out {
		s := fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(prefix),
			fsstore.WithLeases(fsstore.LeaseOptions{Force: true, MaxSize: 100_000, Idle: time.Hour}))
		t.Cleanup(func() { _ = s.Close() })
		out[i] = s
	}
	return out
}

// newWallet creates the wallet walletID with a credits entitlement of
// balance cents and adds members, each capped at capCents a day (0: no
// caps).
func newWallet(t *testing.T, s store.EntitlementStore, walletID string, balance, capCents int64, members ...string) entitlement.Entitlement {
	t.Helper()
	if _, err := s.UpsertAccount(t.Context(), entitlement.Account{AgentID: walletID, Kind: entitlement.KindWallet}); err != nil {
		t.Fatalf("UpsertAccount(%s, wallet): %v", walletID, err)
	}
	e := createCredits(t, s, walletID, balance)
	for _, m := range members {
		ms := entitlement.Membership{WalletID: walletID, MemberID: m}
		if capCents > 0 {
			ms.Caps.Spend = entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: usd(capCents)}
		}
		if _, err := s.AddMember(t.Context(), ms); err != nil {
			t.Fatalf("AddMember(%s, %s): %v", walletID, m, err)
		}
	}
	return e
}

// TestStore_WalletLeaseCharges: three instances, each holding a lease on a
// wallet's entitlement, charge one member's calls at once. The lease
// batches read and write the member's membership (never the
// entitlement), so its daily cap holds exactly across the instances: the
// member spends exactly its cap, the rest is refused naming the member and
// the limit, one wallet.member_limit_reached is written, and the wallet's
// balance is exact. A refund on another instance gives the spend back. A
// removed member is refused at once on every instance, on its lease too.
func TestStore_WalletLeaseCharges(t *testing.T) {
	emulator.Host(t)
	ss := walletStores(t, 3)
	const wallet, member, other = "wallet-lease", "member-capped", "member-free"
	e := newWallet(t, ss[0], wallet, 1_000_000, 1000, member)
	if _, err := ss[0].AddMember(t.Context(), entitlement.Membership{WalletID: wallet, MemberID: other}); err != nil {
		t.Fatalf("AddMember(%s): %v", other, err)
	}
	for i, s := range ss {
		if held, err := fsstore.TakeLease(t.Context(), s, e.ID); err != nil || !held {
			t.Fatalf("instance %d: TakeLease = %t, %v; want a lease", i, held, err)
		}
	}
	const calls = 150 // 10 cents each: 100 fit the cap
	results, errs := make([]store.ConsumeResult, calls), make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			results[i], errs[i] = ss[i%len(ss)].CheckAndConsume(t.Context(), consumeReq(member, fmt.Sprint("k", i), 10))
		})
	}
	wg.Wait()
	consumed := 0
	for i, res := range results {
		switch {
		case errs[i] != nil:
			t.Fatalf("consume %d: %v", i, errs[i])
		case res.Outcome == store.Consumed:
			consumed++
			if res.Consumption.WalletID != wallet || res.Consumption.AgentID != member {
				t.Errorf("consume %d: walletId %q, agentId %q; want %q and %q", i, res.Consumption.WalletID, res.Consumption.AgentID, wallet, member)
			}
		case res.Outcome == store.Denied:
			if d := res.Denials; len(d) != 1 || d[0].Reason != entitlement.ReasonMemberLimit || d[0].MemberID != member || d[0].Limit != entitlement.LimitSpend {
				t.Errorf("consume %d denied with %+v, want member_limit_reached of %s, limit spendLimit", i, d, member)
			}
		default:
			t.Errorf("consume %d: outcome %s", i, res.Outcome)
		}
	}
	if consumed != 100 {
		t.Errorf("%d consumed, want 100 (the member's cap of 1000 cents)", consumed)
	}
	var leaseBatches int64
	for _, s := range ss {
		leaseBatches += s.Stats().LeaseBatches
	}
	if leaseBatches == 0 {
		t.Errorf("no lease batch committed: the member's calls were not charged on the leases")
	}
	m, err := ss[1].GetMember(t.Context(), wallet, member)
	if err != nil || m.Caps.Spend.Spent.Cents != 1000 {
		t.Errorf("GetMember = spent %d, %v; want 1000", m.Caps.Spend.Spent.Cents, err)
	}
	for i, s := range ss {
		if got := getBalance(t, s, e.ID); got != 1_000_000-1000 {
			t.Errorf("instance %d: wallet balance %d, want %d", i, got, 1_000_000-1000)
		}
	}
	if n := countEvents(t, ss[0], event.WalletMemberLimitReached); n != 1 {
		t.Errorf("%d wallet.member_limit_reached events, want 1", n)
	}

	// A refund on another instance gives the member's spend back, in the
	// refund's transaction: one more call fits, on a lease again.
	var charged string
	for _, res := range results {
		if res.Outcome == store.Consumed {
			charged = res.Consumption.ID
			break
		}
	}
	if _, err := ss[2].RefundConsumption(t.Context(), charged, entitlement.Amount{}); err != nil {
		t.Fatalf("RefundConsumption: %v", err)
	}
	if m, err := ss[0].GetMember(t.Context(), wallet, member); err != nil || m.Caps.Spend.Spent.Cents != 990 {
		t.Errorf("GetMember after a refund = spent %d, %v; want 990", m.Caps.Spend.Spent.Cents, err)
	}
	if res, err := ss[1].CheckAndConsume(t.Context(), consumeReq(member, "again", 10)); err != nil || res.Outcome != store.Consumed {
		t.Errorf("consume after the refund = %s %+v, %v; want consumed", res.Outcome, res.Denials, err)
	}

	// The uncapped member spends on the leases until it is removed; then
	// every instance refuses it.
	for i, s := range ss {
		if res, err := s.CheckAndConsume(t.Context(), consumeReq(other, fmt.Sprint("o", i), 10)); err != nil || res.Outcome != store.Consumed {
			t.Fatalf("instance %d: %s's consume = %s, %v; want consumed", i, other, res.Outcome, err)
		}
	}
	if _, err := ss[2].RemoveMember(t.Context(), wallet, other); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	for i, s := range ss {
		req := consumeReq(other, fmt.Sprint("after", i), 10)
		req.EntitlementID = e.ID
		res, err := s.CheckAndConsume(t.Context(), req)
		if err != nil || res.Outcome != store.Denied || res.Denials[0].Reason != entitlement.ReasonNotFound {
			t.Errorf("instance %d: a removed member's consume = %s %+v, %v; want denied not_found", i, res.Outcome, res.Denials, err)
		}
	}
	for _, s := range ss {
		if err := s.ReleaseLeases(t.Context()); err != nil {
			t.Fatalf("ReleaseLeases: %v", err)
		}
	}
	if got := getBalance(t, ss[0], e.ID); got != 1_000_000-1000-30 {
		t.Errorf("wallet balance %d after the leases were released, want %d (the refund and the call after it cancel out)", got, 1_000_000-1000-30)
	}
}

// countEvents counts the pending events of type typ.
func countEvents(t *testing.T, s store.EntitlementStore, typ event.Type) int {
	t.Helper()
	evs, err := s.PendingEvents(t.Context(), 1000)
	if err != nil {
		t.Fatalf("PendingEvents: %v", err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// TestStore_WalletListsAndUsage: a wallet's consumptions and usage are its
// members' charges to it (walletId), a member's are its own calls
// (agentId), each listed once; usage by member totals each member.
func TestStore_WalletListsAndUsage(t *testing.T) {
	emulator.Host(t)
	s := walletStores(t, 1)[0]
	const wallet = "wallet-usage"
	w := newWallet(t, s, wallet, 10_000, 0, "m1", "m2")
	own := createCredits(t, s, "m1", 10_000)
	for i, c := range []struct {
		agent string
		cents int64
		own   bool
	}{{"m1", 10, false}, {"m2", 20, false}, {"m2", 30, false}, {"m1", 40, true}} {
		req := consumeReq(c.agent, fmt.Sprint("u", i), c.cents)
		req.EntitlementID = w.ID
		if c.own {
			req.EntitlementID = own.ID
		}
		if res, err := s.CheckAndConsume(t.Context(), req); err != nil || res.Outcome != store.Consumed {
			t.Fatalf("consume %d = %s %+v, %v", i, res.Outcome, res.Denials, err)
		}
	}
	cs, next, err := s.ListConsumptions(t.Context(), wallet, time.Time{}, store.Page{Limit: 2})
	if err != nil || len(cs) != 2 || next == "" {
		t.Fatalf("ListConsumptions(wallet) page 1 = %d, %q, %v; want 2 and a cursor", len(cs), next, err)
	}
	rest, last, err := s.ListConsumptions(t.Context(), wallet, time.Time{}, store.Page{Limit: 2, Cursor: next})
	if err != nil || len(rest) != 1 || last != "" {
		t.Fatalf("ListConsumptions(wallet) page 2 = %d, %q, %v; want 1 and no cursor", len(rest), last, err)
	}
	for _, c := range append(cs, rest...) {
		if c.WalletID != wallet {
			t.Errorf("a wallet's consumption with walletId %q", c.WalletID)
		}
	}
	mine, _, err := s.ListConsumptions(t.Context(), "m1", time.Time{}, store.Page{})
	if err != nil || len(mine) != 2 {
		t.Errorf("ListConsumptions(m1) = %d, %v; want 2 (one on the wallet, one its own)", len(mine), err)
	}
	members, _, err := s.Usage(t.Context(), usageQuery(wallet, "member"), store.Page{})
	if err != nil || len(members) != 2 || members[0].MemberID != "m1" || members[0].Amounts[0].Cents != 10 ||
		members[1].MemberID != "m2" || members[1].Amounts[0].Cents != 50 || members[1].Count != 2 {
		t.Errorf("Usage(wallet, member) = %+v, %v; want m1 10 cents, m2 50 cents in 2", members, err)
	}
	byService, _, err := s.Usage(t.Context(), usageQuery("m1", "service"), store.Page{})
	if err != nil || len(byService) != 1 || byService[0].Count != 2 || byService[0].Amounts[0].Cents != 50 {
		t.Errorf("Usage(m1, service) = %+v, %v; want 2 calls, 50 cents (its wallet's too)", byService, err)
	}
	self, _, err := s.Usage(t.Context(), usageQuery("m2", "member"), store.Page{})
	if err != nil || len(self) != 1 || self[0].MemberID != "m2" || self[0].Amounts[0].Cents != 50 {
		t.Errorf("Usage(m2, member) = %+v, %v; want its own bucket of 50 cents", self, err)
	}
	ms, _, err := s.ListWallets(t.Context(), "m2", store.Page{})
	if err != nil || len(ms) != 1 || ms[0].WalletID != wallet {
		t.Errorf("ListWallets(m2) = %+v, %v", ms, err)
	}
	if _, _, err := s.ListMembers(t.Context(), wallet, store.Page{Cursor: "nonsense"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ListMembers with a malformed cursor: %v, want Invalid", err)
	}
}

// usageQuery asks for the usage of account over the last day, grouped by
// groupBy.
func usageQuery(account, groupBy string) usage.Query {
	now := time.Now()
	return usage.Query{AgentID: account, From: now.Add(-24 * time.Hour), To: now.Add(time.Hour), GroupBy: usage.GroupBy(groupBy)}
}

// TestStore_CorruptMembership: a membership document is read strictly, as
// every other (decode.go): an order, a period or a counter Stipend never
// writes is an Internal error naming the document and the field, on the
// admin's read and on a member's charge alike.
func TestStore_CorruptMembership(t *testing.T) {
	emulator.Host(t)
	for _, tc := range []struct {
		field string
		value any
	}{
		{"order", "last"},
		{"caps.spend.period", "fortnight"},
		{"caps.spend.spent.cents", int64(-1)},
		{"holds", []any{map[string]any{"id": "h", "cents": int64(-5), "expiresAt": time.Now()}}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			client, prefix := emulator.Client(t), emulator.Prefix(t)
			s := fsstore.New(client, fsstore.WithCollectionPrefix(prefix))
			t.Cleanup(func() { _ = s.Close() })
			e := newWallet(t, s, "wallet-corrupt", 1000, 500, "member-corrupt")
			check := corrupt(t, client, prefix, "memberships", "wallet-corrupt~member-corrupt", tc.field, tc.field[:min(len(tc.field), 5)], tc.value)
			_, err := s.GetMember(t.Context(), "wallet-corrupt", "member-corrupt")
			check("GetMember", err)
			req := consumeReq("member-corrupt", "k", 10)
			req.EntitlementID = e.ID
			_, err = s.CheckAndConsume(t.Context(), req)
			check("CheckAndConsume", err)
		})
	}
}
