package conformance

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// walletConcurrencyTests are the cases of RunConcurrencyTests on a wallet
// shared by its members.
var walletConcurrencyTests = []optionCase{
	{"WalletCaps", func(t *testing.T, s store.EntitlementStore, clock *Clock, opts ConcurrencyOptions) {
		walletCapsRace(t, []store.EntitlementStore{s}, clock, opts.MaxCallers, opts.Seed)
	}},
}

// instancesWalletCaps is walletCapsRace across the instances.
func instancesWalletCaps(t *testing.T, ss []store.EntitlementStore, clock *Clock, _ InstanceOptions) string {
	return walletCapsRace(t, ss, clock, defaultMaxCallers, int64(rand.Uint64()>>1))
}

// walletRaceMembers is how many members share the wallet of walletCapsRace,
// walletRaceCap the daily cap of each, and walletRaceKeys the keys each
// member's callers draw from (so callers send the same keys at once).
const (
	walletRaceMembers = 8
	walletRaceCap     = 2_000
	walletRaceKeys    = 24
)

// walletCapsRace charges one wallet, through the stores ss in turn, from
// callers concurrent callers acting for walletRaceMembers members, each
// with a daily cap: consumes, and holds then captured (even keys, half the
// hold) or released (odd keys), each key's call fixed by the key (so a key
// sent twice is a replay, never a conflict), costs drawn from seed. After:
// no member spent more than its cap; each member's stored charges to the
// wallet add up to the spend its membership shows; the wallet lost exactly
// what all of them charged; no key charged twice; every refusal is the
// member's cap; no hold is left open. It returns the wallet's entitlement.
func walletCapsRace(t *testing.T, ss []store.EntitlementStore, clock *Clock, callers int, seed int64) string {
	t.Helper()
	const initial = 10_000_000
	s := ss[0]
	w, e := walletWithCredits(t, s, initial, clock.Now())
	members := make([]string, walletRaceMembers)
	for i := range members {
		members[i] = fmt.Sprintf("member-%d-%s", i, newAgent())
		addMember(t, s, w, members[i], entitlement.OrderOwnFirst, dailyCap(walletRaceCap))
	}
	// cost is what key k of a member asks: 1–400 cents, fixed by the key.
	cost := func(member string, k int) int64 {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%s/%d", seed, member, k)
		return 1 + int64(h.Sum64()%400)
	}
	var mu sync.Mutex
	var failures []string
	var refused atomic.Int64
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	together(callers, func(c int) {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(c)))
		st := ss[c%len(ss)]
		member := members[c%walletRaceMembers]
		for range callsPerCaller {
			k := rng.IntN(walletRaceKeys)
			cents := cost(member, k)
			if k%3 != 0 {
				req := request(member, fmt.Sprintf("c%d", k), cents)
				res, err := st.CheckAndConsume(t.Context(), req)
				switch {
				case store.CodeOf(err) == store.CodeUnavailable:
				case err != nil:
					fail("CheckAndConsume(%s, key %d): %v", member, k, err)
				case res.Outcome == store.Denied:
					checkCapDenial(fail, &refused, member, e.ID, res.Denials)
				case res.Outcome != store.Consumed && res.Outcome != store.Replay:
					fail("CheckAndConsume(%s, key %d) = %s, want consumed, replayed or denied", member, k, res.Outcome)
				}
				continue
			}
			req := holdRequest(member, fmt.Sprintf("h%d", k), cents)
			res, err := st.Authorize(t.Context(), req)
			switch {
			case store.CodeOf(err) == store.CodeUnavailable:
				continue
			case err != nil:
				fail("Authorize(%s, key %d): %v", member, k, err)
				continue
			case res.Outcome == store.Denied:
				checkCapDenial(fail, &refused, member, e.ID, res.Denials)
				continue
			}
			h := res.Hold
			if k%2 == 0 {
				_, err = st.CaptureHold(t.Context(), h.ID, member, entitlement.Amount{Cost: ptr(usd(cents / 2))})
			} else {
				_, err = st.ReleaseHold(t.Context(), h.ID, member)
			}
			if err != nil && store.CodeOf(err) != store.CodeUnavailable && store.CodeOf(err) != store.CodeConflict {
				fail("end of hold %s (%s, key %d): %v", h.ID, member, k, err)
			}
		}
	})
	for _, f := range failures {
		t.Errorf("seed %d: %s", seed, f)
	}
	if refused.Load() == 0 {
		t.Errorf("seed %d: no call reached a member's cap; the race asks for more than the caps allow", seed)
	}
	var total int64
	for _, m := range members {
		var spent int64
		keys := map[string]bool{}
		for _, c := range listAllConsumptions(t, s, m, time.Time{}) {
			if c.WalletID != w {
				t.Errorf("seed %d: %s's consumption %s names wallet %q, want %s", seed, m, c.ID, c.WalletID, w)
			}
			if keys[c.IdempotencyKey] {
				t.Errorf("seed %d: %s's key %q charged twice", seed, m, c.IdempotencyKey)
			}
			keys[c.IdempotencyKey] = true
			spent += c.Cost.Cents
		}
		got := getMember(t, s, w, m)
		if spent > walletRaceCap || got.Caps.Spend.Spent.Cents != spent {
			t.Errorf("seed %d: %s charged %d (its membership shows %d), want the two equal and at most %d", seed, m, spent, got.Caps.Spend.Spent.Cents, walletRaceCap)
		}
		total += spent
	}
	for _, st := range ss {
		got := getEntitlement(t, st, e.ID)
		if got.Credits.Balance.Cents != initial-total {
			t.Errorf("seed %d: wallet balance = %d, want %d − %d charged", seed, got.Credits.Balance.Cents, int64(initial), total)
		}
	}
	return e.ID
}

// checkCapDenial reports a refusal of member's call that is not its cap on
// the wallet's entitlement id, and counts it in refused.
func checkCapDenial(fail func(string, ...any), refused *atomic.Int64, member, id string, denials []entitlement.Denial) {
	refused.Add(1)
	for _, d := range denials {
		if d.EntitlementID != id || d.Reason != entitlement.ReasonMemberLimit || d.MemberID != member || d.Limit != entitlement.LimitSpend {
			fail("%s refused with %+v, want only its spend cap on %s", member, d, id)
		}
	}
}
