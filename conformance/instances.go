package conformance

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// NewStores returns n stores on one fresh, empty backend, each reading time
// from now: n instances of one deployment, as behind a load balancer.
type NewStores func(t *testing.T, n int, now func() time.Time) []store.EntitlementStore

// InstanceOptions are a backend's additions to RunInstanceTests.
type InstanceOptions struct {
	// Invariants, if set, checks what the backend keeps of entitlement id
	// beyond the contract (Firestore: its lease documents and registry)
	// after every test, reading through s.
	Invariants func(t *testing.T, s store.EntitlementStore, id string)
	// Reserve, if set, makes s hold back part of entitlement id for
	// itself as its normal operation would (Firestore: a lease), so that
	// the crash test can abandon it with that part.
	Reserve func(t *testing.T, s store.EntitlementStore, id string)
}

// instanceStores is how many instances RunInstanceTests runs.
const instanceStores = 3

// RunInstanceTests runs the guarantees of store.EntitlementStore for one
// entitlement charged through several instances at once: the exact balance
// (initial − stored charges, read the same from every instance, by
// GetEntitlement, ListEntitlements and Check) with keys sent to two
// instances at once charged at most once; a credits entitlement and a quota
// drained to zero across the instances (every affordable call consumed,
// exactly one entitlement.depleted, the next call denied on every
// instance); a revocation among consumes on every instance; and a crashed
// instance (abandoned after reserving part of the entitlement) whose share
// the others can still spend; a low-balance alert that fires exactly once,
// and a spend limit charged exactly, across the instances; a partial
// refund and a dispute of the paying payment among them; and a wallet's
// members charging it through every instance within their caps. Run it
// under -race.
func RunInstanceTests(t *testing.T, newStores NewStores, opts InstanceOptions) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, ss []store.EntitlementStore, clock *Clock, opts InstanceOptions) string
	}{
		{"ExactBalance", instancesExact},
		{"DrainCredits", func(t *testing.T, ss []store.EntitlementStore, clock *Clock, _ InstanceOptions) string {
			return instancesDrain(t, ss, clock, false)
		}},
		{"DrainQuota", func(t *testing.T, ss []store.EntitlementStore, clock *Clock, _ InstanceOptions) string {
			return instancesDrain(t, ss, clock, true)
		}},
		{"RevokeAmongConsumes", instancesRevoke},
		{"Crash", instancesCrash},
		{"AlertOnce", instancesAlert},
		{"SpendLimit", instancesSpendLimit},
		{"RefundAndDispute", instancesRefundAndDispute},
		{"WalletCaps", instancesWalletCaps},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := NewClock()
			ss := newStores(t, instanceStores, clock.Now)
			id := tt.run(t, ss, clock, opts)
			if opts.Invariants != nil && id != "" && !t.Failed() {
				for _, s := range ss {
					opts.Invariants(t, s, id)
				}
			}
		})
	}
}

// consumeOn runs callers on every store, each making calls consumes of
// cents (or 1 unit, quota) with keys of its own, and returns the results.
func consumeOn(t *testing.T, ss []store.EntitlementStore, agent string, callers, calls int, cents int64, quota bool) []store.ConsumeResult {
	var mu sync.Mutex
	var out []store.ConsumeResult
	together(len(ss)*callers, func(i int) {
		s := ss[i%len(ss)]
		for j := range calls {
			req := request(agent, fmt.Sprint("in-", i, "-", j), cents)
			if quota {
				req.Cost = nil
			}
			res, err := s.CheckAndConsume(t.Context(), req)
			if err != nil {
				t.Errorf("instance %d: CheckAndConsume(%s): %v", i%len(ss), req.IdempotencyKey, err)
				continue
			}
			mu.Lock()
			out = append(out, res)
			mu.Unlock()
		}
	})
	return out
}

// storedCharges returns what the agent's stored consumptions charged
// (cents, or units for quota) and fails on a key stored twice.
func storedCharges(t *testing.T, s store.EntitlementStore, agent string) (total int64, n int) {
	t.Helper()
	seen := map[string]bool{}
	for _, c := range listConsumptionPages(t, s, agent, time.Time{}, store.MaxPageSize) {
		if seen[c.IdempotencyKey] {
			t.Errorf("key %q has two consumptions", c.IdempotencyKey)
		}
		seen[c.IdempotencyKey] = true
		total += c.Cost.Cents
		if c.EntitlementType == entitlement.TypeQuota {
			total += c.Units
		}
	}
	return total, len(seen)
}

// left is what e has left: cents, or units for a quota.
func left(e entitlement.Entitlement) int64 {
	if e.Type == entitlement.TypeQuota {
		return e.Quota.Remaining
	}
	return e.Credits.Balance.Cents
}

// wantExact checks that every instance reads entitlement id with want left,
// by GetEntitlement, ListEntitlements and Balance, and that Check allows exactly
// what is left (credits).
func wantExact(t *testing.T, ss []store.EntitlementStore, agent, id string, want int64) {
	t.Helper()
	for i, s := range ss {
		e := getEntitlement(t, s, id)
		if got := left(e); got != want {
			t.Errorf("instance %d: GetEntitlement left %d, want %d (initial − stored charges)", i, got, want)
		}
		list, _, err := s.ListEntitlements(t.Context(), agent, store.EntitlementFilter{}, store.Page{})
		if err != nil || len(list) != 1 || left(list[0]) != want {
			t.Errorf("instance %d: ListEntitlements = %d entitlements (%v), want one with %d left", i, len(list), err, want)
		}
		if e.Type != entitlement.TypeCredits || e.Status != entitlement.StatusActive {
			continue
		}
		if b, err := s.Balance(t.Context(), agent); err != nil || len(b.Credits) != 1 || b.Credits[0].Total.Cents != want {
			t.Errorf("instance %d: Balance = %+v (%v), want one currency with %d in all", i, b.Credits, err, want)
		}
		for _, tc := range []struct {
			cents int64
			want  store.Outcome
		}{{want, store.Allowed}, {want + 1, store.Denied}} {
			if tc.cents == 0 {
				continue
			}
			res, err := s.Check(t.Context(), request(agent, fmt.Sprint("check-", tc.cents), tc.cents))
			if err != nil || res.Outcome != tc.want {
				t.Errorf("instance %d: Check(%d) with %d left = %s (%v), want %s", i, tc.cents, want, res.Outcome, err, tc.want)
			}
		}
	}
}

func instancesExact(t *testing.T, ss []store.EntitlementStore, clock *Clock, _ InstanceOptions) string {
	const initial = 100_000
	agent := newAgent()
	e := createEntitlement(t, ss[0], credits(agent, initial, clock.Now()))
	// Every key is sent to two instances at once: one charge each.
	const keys = 40
	results := make([]store.ConsumeResult, 2*keys)
	together(2*keys, func(i int) {
		s := ss[i%len(ss)]
		if i >= keys {
			s = ss[(i+1)%len(ss)]
		}
		res, err := s.CheckAndConsume(t.Context(), request(agent, fmt.Sprint("dup-", i%keys), 3))
		if err != nil {
			t.Errorf("CheckAndConsume(dup-%d): %v", i%keys, err)
		}
		results[i] = res
	})
	for k := range keys {
		a, b := results[k], results[k+keys]
		if a.Consumption.ID == "" || a.Consumption.ID != b.Consumption.ID || (a.Outcome == store.Consumed) == (b.Outcome == store.Consumed) {
			t.Errorf("key dup-%d on two instances: %s %q and %s %q, want one consumed and one replay of it",
				k, a.Outcome, a.Consumption.ID, b.Outcome, b.Consumption.ID)
		}
	}
	consumeOn(t, ss, agent, 4, 5, 7, false)
	charged, n := storedCharges(t, ss[0], agent)
	if want := keys + len(ss)*4*5; n != want {
		t.Errorf("%d keys stored, want %d", n, want)
	}
	wantExact(t, ss, agent, e.ID, initial-charged)
	return e.ID
}

func instancesDrain(t *testing.T, ss []store.EntitlementStore, clock *Clock, units bool) string {
	const affordable = 60
	const cents = 5
	agent := newAgent()
	e := credits(agent, affordable*cents, clock.Now())
	if units {
		e = quota(agent, affordable, clock.Now())
	}
	e = createEntitlement(t, ss[0], e)
	// More calls than the entitlement affords, on every instance at once.
	results := consumeOn(t, ss, agent, 4, 8, cents, units)
	if consumed := countConsumed(t, results, ""); consumed != affordable {
		t.Errorf("%d calls consumed, want every affordable one: %d", consumed, affordable)
	}
	if _, n := storedCharges(t, ss[0], agent); n != affordable {
		t.Errorf("%d consumptions stored, want %d", n, affordable)
	}
	if got := depletedEvents(t, ss[0], e.ID); got != 1 {
		t.Errorf("%d entitlement.depleted events, want exactly 1", got)
	}
	want := entitlement.ReasonInsufficientBalance
	if units {
		want = entitlement.ReasonQuotaExhausted
	}
	for i, s := range ss {
		req := request(agent, fmt.Sprint("after-", i), cents)
		if units {
			req.Cost = nil
		}
		res := checkAndConsume(t, s, req)
		if res.Outcome != store.Denied || len(res.Denials) != 1 || res.Denials[0].Reason != want {
			t.Errorf("instance %d: the call after the drain = %s %v, want denied %s", i, res.Outcome, res.Denials, want)
		}
	}
	wantExact(t, ss, agent, e.ID, 0)
	return e.ID
}

func instancesRevoke(t *testing.T, ss []store.EntitlementStore, clock *Clock, _ InstanceOptions) string {
	const initial = 1_000_000
	agent := newAgent()
	e := createEntitlement(t, ss[0], credits(agent, initial, clock.Now()))
	callers := 4 * len(ss)
	var revokeErr error
	together(callers+1, func(i int) {
		if i == callers {
			_, revokeErr = ss[1].RevokeEntitlement(t.Context(), e.ID)
			for try := 0; try < 3 && store.CodeOf(revokeErr) == store.CodeUnavailable; try++ {
				_, revokeErr = ss[1].RevokeEntitlement(t.Context(), e.ID)
			}
			return
		}
		for j := range callsPerCaller {
			_, _ = ss[i%len(ss)].CheckAndConsume(t.Context(), request(agent, fmt.Sprint("rv-", i, "-", j), 7))
		}
	})
	if revokeErr != nil {
		t.Fatalf("RevokeEntitlement among consumes: %v", revokeErr)
	}
	charged, _ := storedCharges(t, ss[0], agent)
	for i, s := range ss {
		final := getEntitlement(t, s, e.ID)
		if final.Status != entitlement.StatusRevoked || initial-final.Credits.Balance.Cents != charged {
			t.Errorf("instance %d: after a revocation among consumes: %s, balance %d of %d, stored charges %d; want revoked and initial − final = charged",
				i, final.Status, final.Credits.Balance.Cents, initial, charged)
		}
		req := request(agent, fmt.Sprint("after-revoke-", i), 7)
		req.EntitlementID = e.ID // a revoked entitlement is no candidate: name it for the reason
		res := checkAndConsume(t, s, req)
		if res.Outcome != store.Denied || res.Denials[0].Reason != entitlement.ReasonRevoked {
			t.Errorf("instance %d: consume after the revocation = %s %v, want denied revoked", i, res.Outcome, res.Denials)
		}
	}
	if again, _ := storedCharges(t, ss[0], agent); again != charged {
		t.Errorf("stored charges %d after the revocation, %d before: something was charged after it", again, charged)
	}
	return e.ID
}

func instancesCrash(t *testing.T, ss []store.EntitlementStore, clock *Clock, opts InstanceOptions) string {
	const affordable = 40
	const cents = 5
	agent := newAgent()
	e := createEntitlement(t, ss[0], credits(agent, affordable*cents, clock.Now()))
	mustConsume(t, ss[0], request(agent, "before-crash", cents))
	if opts.Reserve != nil {
		opts.Reserve(t, ss[0], e.ID)
	}
	// ss[0] crashes: it is never used again, and releases nothing.
	results := consumeOn(t, ss[1:], agent, 3, 10, cents, false)
	if consumed := 1 + countOutcome(results, store.Consumed); consumed != affordable {
		t.Errorf("%d calls consumed with one instance crashed, want all %d the entitlement affords", consumed, affordable)
	}
	if got := depletedEvents(t, ss[1], e.ID); got != 1 {
		t.Errorf("%d entitlement.depleted events, want exactly 1", got)
	}
	wantExact(t, ss[1:], agent, e.ID, 0)
	return e.ID
}
