package firestore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// leaseTestSize is the most one lease reserves in the lease suites: a few
// calls, so leases run dry, refill and gather all the time.
const leaseTestSize = 20

// newLeasingStores returns n stores on one emulator prefix, each in lease
// mode with small leases and no idle release (a crashed instance keeps its
// leases). Every store releases its leases when the test ends.
func newLeasingStores(t *testing.T, n int, now func() time.Time) []store.EntitlementStore {
	t.Helper()
	prefix := emulator.Prefix(t)
	out := make([]store.EntitlementStore, n)
	for i := range out {
		s := fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(prefix), fsstore.WithClock(now),
			fsstore.WithLeases(fsstore.LeaseOptions{Force: true, MaxSize: leaseTestSize, Idle: time.Hour}))
		t.Cleanup(func() { _ = s.Close() })
		out[i] = s
	}
	return out
}

func TestStore_Instances(t *testing.T) {
	emulator.Host(t)
	conformance.RunInstanceTests(t, newLeasingStores, conformance.InstanceOptions{
		Invariants: checkLeases,
		Reserve: func(t *testing.T, s store.EntitlementStore, id string) {
			held, err := fsstore.TakeLease(t.Context(), s.(*fsstore.Store), id)
			if err != nil || !held {
				t.Fatalf("TakeLease(%s) = %t, %v; want a lease held", id, held, err)
			}
		},
	})
}

// checkLeases checks the lease invariants of entitlement/lease.go on what
// is stored: every lease spent within its limit, the registry naming
// exactly the open leases with their limits, nothing free below zero (and a
// unit outside the leases while any is open), and the exact balance a read
// shows equal to settled − Σ spent of the open leases.
func checkLeases(t *testing.T, s store.EntitlementStore, id string) {
	t.Helper()
	e, leases, err := fsstore.LeaseState(t.Context(), s.(*fsstore.Store), id)
	if err != nil {
		t.Fatalf("LeaseState(%s): %v", id, err)
	}
	limits := map[string]int64{}
	for _, o := range e.Leases {
		limits[o.ID] = o.Limit
	}
	var spent int64
	for _, l := range leases {
		if l.Spent < 0 || l.Spent > l.Limit {
			t.Errorf("lease %s spent %d of %d", l.ID, l.Spent, l.Limit)
		}
		limit, registered := limits[l.ID]
		switch {
		case l.Closed && registered:
			t.Errorf("closed lease %s is registered", l.ID)
		case !l.Closed && (!registered || limit != l.Limit):
			t.Errorf("open lease %s (limit %d) registered %t with limit %d", l.ID, l.Limit, registered, limit)
		case !l.Closed:
			spent += l.Spent
			delete(limits, l.ID)
		}
	}
	if len(limits) > 0 {
		t.Errorf("registered leases %v have no open document", limits)
	}
	settled := e.Credits.Balance.Cents
	if e.Type == entitlement.TypeQuota {
		settled = e.Quota.Remaining
	}
	var reserved int64
	for _, o := range e.Leases {
		reserved += o.Limit
	}
	if free := e.Free(); free < 0 || (len(e.Leases) > 0 && settled-reserved < 1) {
		t.Errorf("free %d, settled %d, reserved %d by %d leases; want free ≥ 0 and settled − reserved ≥ 1 with leases",
			free, settled, reserved, len(e.Leases))
	}
	got, err := s.GetEntitlement(t.Context(), id)
	if err != nil {
		t.Fatalf("GetEntitlement(%s): %v", id, err)
	}
	exact := got.Credits.Balance.Cents
	if got.Type == entitlement.TypeQuota {
		exact = got.Quota.Remaining
	}
	if exact != settled-spent {
		t.Errorf("GetEntitlement shows %d, want settled %d − spent %d", exact, settled, spent)
	}
}

// TestStore_LeaseCharges checks that a store holding a lease charges it and
// not its entitlement: the lease's spent grows while the entitlement's
// settled balance stays, reads (from another instance too) are exact, and
// ReleaseLeases folds the lease back.
func TestStore_LeaseCharges(t *testing.T) {
	emulator.Host(t)
	ss := newLeasingStores(t, 2, time.Now)
	a, b := ss[0].(*fsstore.Store), ss[1]
	agent := "agent-lease"
	e := createCreditsAs(t, a, "lease-charges", agent, 1000)
	if held, err := fsstore.TakeLease(t.Context(), a, e.ID); err != nil || !held {
		t.Fatalf("TakeLease = %t, %v; want a lease", held, err)
	}
	for i := range 3 {
		res, err := a.CheckAndConsume(t.Context(), entitlement.ConsumeRequest{AgentID: agent, Service: "search", Tool: "web",
			IdempotencyKey: fmt.Sprint("k", i), Cost: &money.Money{Cents: 5, Currency: "USD"}, EntitlementID: e.ID})
		if err != nil || res.Outcome != store.Consumed {
			t.Fatalf("CheckAndConsume %d = %s, %v; want consumed", i, res.Outcome, err)
		}
	}
	stored, leases, err := fsstore.LeaseState(t.Context(), a, e.ID)
	if err != nil {
		t.Fatalf("LeaseState: %v", err)
	}
	var spent int64
	for _, l := range leases {
		spent += l.Spent
	}
	if stored.Credits.Balance.Cents != 1000 || spent != 15 || len(stored.Leases) == 0 {
		t.Errorf("stored balance %d, %d leases registered, spent %d on leases; want 1000, some, and 15 (charged on leases)",
			stored.Credits.Balance.Cents, len(stored.Leases), spent)
	}
	for i, s := range ss {
		if got := getBalance(t, s, e.ID); got != 985 {
			t.Errorf("instance %d: GetEntitlement balance %d, want 985", i, got)
		}
	}
	if err := a.ReleaseLeases(t.Context()); err != nil {
		t.Fatalf("ReleaseLeases: %v", err)
	}
	stored, _, err = fsstore.LeaseState(t.Context(), a, e.ID)
	if err != nil || stored.Credits.Balance.Cents != 985 || len(stored.Leases) != 0 {
		t.Errorf("after ReleaseLeases: stored balance %d with %d leases (%v), want 985 and none", stored.Credits.Balance.Cents, len(stored.Leases), err)
	}
	if got := getBalance(t, b, e.ID); got != 985 {
		t.Errorf("GetEntitlement balance %d after the release, want 985", got)
	}
}

func getBalance(t *testing.T, s store.EntitlementStore, id string) int64 {
	t.Helper()
	e, err := s.GetEntitlement(t.Context(), id)
	if err != nil {
		t.Fatalf("GetEntitlement(%s): %v", id, err)
	}
	return e.Credits.Balance.Cents
}

// TestStore_FirstContact starts four instances (default lease options) on
// one entitlement at the same instant, as a fan-out behind a load balancer
// does. Their batches read the entitlement optimistically (guard.go), so
// none of them waits out a lock: with read locks, the first batches of the
// four deadlocked and the emulator broke each deadlock with a "Transaction
// lock timeout" after about 2 s. Every call is charged once, the balance is
// exact on every instance and the lease invariants hold.
func TestStore_FirstContact(t *testing.T) {
	emulator.Host(t)
	const instances, callers, calls = 4, 16, 40
	prefix := emulator.Prefix(t)
	stores := make([]*fsstore.Store, instances)
	for i := range stores {
		stores[i] = fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(prefix),
			fsstore.WithLeases(fsstore.LeaseOptions{Idle: time.Hour}))
		t.Cleanup(func() { _ = stores[i].ReleaseLeases(context.Background()) })
	}
	const initial = 100_000
	e := createCreditsAs(t, stores[0], "first-contact", "agent-fan", initial)
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, instances*callers*calls)
	for i, s := range stores {
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for k := range calls {
					res, err := s.CheckAndConsume(t.Context(), entitlement.ConsumeRequest{AgentID: "agent-fan", Service: "search",
						Tool: "web", IdempotencyKey: fmt.Sprintf("i%d-c%d-%d", i, c, k), Cost: &money.Money{Cents: 1, Currency: "USD"},
						EntitlementID: e.ID})
					if err == nil && res.Outcome != store.Consumed {
						err = fmt.Errorf("outcome %s %v", res.Outcome, res.Denials)
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("CheckAndConsume: %v", err)
	}
	var total fsstore.Stats
	for i, s := range stores {
		st := s.Stats()
		t.Logf("instance %d: %+v", i, st)
		total.LockTimeouts += st.LockTimeouts
		if got := getBalance(t, s, e.ID); got != initial-instances*callers*calls {
			t.Errorf("instance %d: balance %d, want %d", i, got, initial-instances*callers*calls)
		}
	}
	if total.LockTimeouts != 0 {
		t.Errorf("%d batch attempts waited out a lock timeout; want none: hot-path batches take no read locks", total.LockTimeouts)
	}
	checkLeases(t, stores[0], e.ID)
}

// TestStore_DeadInstanceLeaseFreed: an instance that dies holding a lease
// (here: stops, without releasing it) no longer renews it, and once its
// deadline (LeaseOptions.TTL) has passed, another instance's next
// transaction on the entitlement folds it: the share is free again and
// the balance exact. Should the owner come back and charge the lease, its
// charge finds the lease closed and goes to the entitlement, charged once
// (issue 29, item 6).
func TestStore_DeadInstanceLeaseFreed(t *testing.T) {
	emulator.Host(t)
	clock := conformance.NewClock()
	prefix := emulator.Prefix(t)
	const ttl = 30 * time.Second
	open := func(o fsstore.LeaseOptions) *fsstore.Store {
		o.Idle, o.TTL = time.Hour, ttl // the owner never releases by itself: it is "dead"
		s := fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(prefix), fsstore.WithClock(clock.Now), fsstore.WithLeases(o))
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	dead, live := open(fsstore.LeaseOptions{Force: true, MaxSize: 300}), open(fsstore.LeaseOptions{Off: true})
	agent := "agent-dead-lease"
	e := createCreditsAs(t, live, "dead-lease", agent, 1000)
	consume := func(s *fsstore.Store, key string) {
		t.Helper()
		res, err := s.CheckAndConsume(t.Context(), entitlement.ConsumeRequest{AgentID: agent, Service: "search", Tool: "web",
			IdempotencyKey: key, Cost: &money.Money{Cents: 5, Currency: "USD"}, EntitlementID: e.ID})
		if err != nil || res.Outcome != store.Consumed {
			t.Fatalf("CheckAndConsume %s = %s, %v; want consumed", key, res.Outcome, err)
		}
	}
	if held, err := fsstore.TakeLease(t.Context(), dead, e.ID); err != nil || !held {
		t.Fatalf("TakeLease = %t, %v; want a lease", held, err)
	}
	consume(dead, "on-lease")
	registered := func() int {
		t.Helper()
		stored, _, err := fsstore.LeaseState(t.Context(), live, e.ID)
		if err != nil {
			t.Fatalf("LeaseState: %v", err)
		}
		return len(stored.Leases)
	}

	consume(live, "before-deadline")
	if n := registered(); n != 1 {
		t.Fatalf("before the deadline: %d leases registered, want the dead instance's 1 (still reserved)", n)
	}
	clock.Advance(ttl + time.Second)
	consume(live, "after-deadline")
	if n := registered(); n != 0 {
		t.Errorf("after the deadline: %d leases registered, want 0 (folded by the live instance)", n)
	}
	if got := live.Stats().Expired; got != 1 {
		t.Errorf("live instance's Stats().Expired = %d, want 1", got)
	}
	stored, leases, err := fsstore.LeaseState(t.Context(), live, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 1 || !leases[0].Closed || stored.Credits.Balance.Cents != 985 {
		t.Errorf("after the fold: leases %+v, stored balance %d; want one closed lease and 985", leases, stored.Credits.Balance.Cents)
	}
	// The owner comes back: its lease is closed, so its charge goes to the
	// entitlement.
	consume(dead, "late")
	if got := getBalance(t, live, e.ID); got != 980 {
		t.Errorf("after the owner's late charge: balance %d, want 980 (every charge once)", got)
	}
}

// TestStore_NoLeaseForAReleasedLane: a refill that waited for the lane's
// transactions while the lane was released takes no lease (issue 29, item
// 12: it took one that no lane would spend or release).
func TestStore_NoLeaseForAReleasedLane(t *testing.T) {
	emulator.Host(t)
	s := newLeasingStores(t, 1, time.Now)[0].(*fsstore.Store)
	e := createCreditsAs(t, s, "released-lane", "agent-released", 1000)
	if err := fsstore.RefillAfterRelease(t.Context(), s, e.ID); err != nil {
		t.Fatalf("RefillAfterRelease: %v", err)
	}
	stored, leases, err := fsstore.LeaseState(t.Context(), s, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.Leases) != 0 || len(leases) != 0 {
		t.Errorf("after a refill on a released lane: %d leases registered, %d lease documents; want none", len(stored.Leases), len(leases))
	}
}
