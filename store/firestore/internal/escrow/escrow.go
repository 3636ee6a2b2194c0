// Package escrow is what one Firestore store instance knows of its escrow
// leases: a lane per hot entitlement, with the lease it spends, the next one
// a refill took, the dry ones still to fold back, and what sizes the next
// lease. The rules of a lease (what it reserves, what a charge on it may
// take, how a gather folds it) are entitlement/lease.go's; the transactions
// that take, spend, fold and release leases are the store's
// (store/firestore: lease_charge.go, lease_refill.go, gather.go). Nothing
// here is needed for safety: every lease charge commits only if its lease
// document is as read, so a lane that is wrong about a lease loses a
// transaction, never money.
//
// The consume path on Firestore, in one screen:
//
//  1. charge.Consume (store/internal/charge) reads the key and the account's
//     limits, picks the candidates, and queues the call on the candidate's
//     lane of the shared coalescer (store/internal/coalesce).
//  2. The lane's batch (store/firestore/lane.go, applyLane) first charges
//     what fits on this instance's lease (lease_charge.go): one transaction
//     on the lease document, never on the entitlement's.
//  3. The rest (holds, captures, releases, refunds, consumes no lease fits)
//     run in one transaction on the entitlement (batch.go), which applies
//     each call with the charge engine (store/internal/charge/engine.go),
//     gathers every lease first when the calls need the exact balance
//     (gather.go), and takes a lease for this instance when the entitlement
//     is hot across instances.
//  4. A refill takes the next lease in the background before the active one
//     runs dry; a lane idle for a while, or a store closing, folds its
//     leases back (lease_refill.go).
package escrow

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
)

// RecentWriter is how recent another instance's write of an entitlement
// (or a sighting of it) must be for this instance to count it as active.
const RecentWriter = 5 * time.Second

// RefillPause is how long a lane waits before trying again after a refill
// that got no lease (nothing free) or failed.
const RefillPause = 500 * time.Millisecond

// Lanes holds the lease lanes of this instance, by entitlement ID.
type Lanes struct {
	mu sync.Mutex
	m  map[string]*Lane
	// seen is when a batch last saw another instance active on an
	// entitlement, so its next hot batch leases even if that one alone
	// saw nothing (entries are dropped once stale).
	seen map[string]time.Time
}

// Saw records that another instance is active on entitlementID.
func (l *Lanes) Saw(entitlementID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil || len(l.seen) > 1000 {
		l.seen = make(map[string]time.Time) // a bound, not a cache policy: a hot entitlement is seen again at once
	}
	l.seen[entitlementID] = time.Now()
}

// SawOther reports whether another instance was seen on entitlementID
// within RecentWriter.
func (l *Lanes) SawOther(entitlementID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.seen[entitlementID]
	return ok && time.Since(t) < RecentWriter
}

// Lane returns the lease lane of entitlementID, or nil if it has none or is
// releasing it.
func (l *Lanes) Lane(entitlementID string) *Lane {
	l.mu.Lock()
	defer l.mu.Unlock()
	ll := l.m[entitlementID]
	if ll == nil || ll.Closing() {
		return nil
	}
	return ll
}

// Releasing reports whether the lease lane of entitlementID is being
// released.
func (l *Lanes) Releasing(entitlementID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ll := l.m[entitlementID]
	return ll != nil && ll.Closing()
}

// Ensure returns the lease lane of e, making it if new (created true).
func (l *Lanes) Ensure(e *entitlement.Entitlement) (ll *Lane, created bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]*Lane)
	}
	if ll = l.m[e.ID]; ll != nil {
		return ll, false
	}
	ll = &Lane{id: e.ID, ent: e.Clone(), since: time.Now(), lastUse: time.Now()}
	l.m[e.ID] = ll
	return ll, true
}

// Drop forgets ll (after its release).
func (l *Lanes) Drop(ll *Lane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m[ll.id] == ll {
		delete(l.m, ll.id)
	}
}

// All returns every lease lane.
func (l *Lanes) All() []*Lane {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*Lane, 0, len(l.m))
	for _, ll := range l.m {
		out = append(out, ll)
	}
	return out
}

// Lane is what this instance knows of its leases on one entitlement. Only
// the lane's batches spend them.
type Lane struct {
	// Tx orders the lane's transactions on the entitlement (its direct
	// batches, refills and the release), so they never contend with each
	// other.
	Tx sync.Mutex

	id string
	mu sync.Mutex
	// ent is the entitlement as the last transaction of the lane read it:
	// its status, scope, type, expiry and currency check lease charges
	// (a revoke folds the leases, so an open lease means it is active).
	ent entitlement.Entitlement
	// active is the lease being spent, next the one refilled for when it
	// runs dry; retired are leases the lane no longer spends, still open
	// until a refill or release folds them.
	active, next string
	retired      []string
	// left and limit are the active lease's, as its last batch read it.
	left, limit int64
	refilling   bool
	refilled    chan struct{} // closed when the running refill ends
	closing     bool
	pauseUntil  time.Time
	// charged (since since) and maxCall size the next lease.
	charged  int64
	since    time.Time
	maxCall  int64
	lastUse  time.Time
	idleStop *time.Timer
}

// ID is the lane's entitlement ID.
func (ll *Lane) ID() string { return ll.id }

// Ent returns a copy of the entitlement as the lane last read it.
func (ll *Lane) Ent() entitlement.Entitlement {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return ll.ent.Clone()
}

// Current returns the lease to spend: the active one, or the next one
// once the active one is retired; "" if none.
func (ll *Lane) Current() string {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.active == "" && ll.next != "" {
		ll.active, ll.next = ll.next, ""
	}
	return ll.active
}

// Busy reports whether the lane holds or is getting a lease: its batches
// then take none of their own.
func (ll *Lane) Busy() bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return ll.active != "" || ll.next != "" || ll.refilling
}

// HasLease reports whether the lane holds a lease, active or next.
func (ll *Lane) HasLease() bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return ll.active != "" || ll.next != ""
}

// Leases returns the leases the lane spends or will: its active and next
// ones (their owner renews their deadlines).
func (ll *Lane) Leases() []string {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	var ids []string
	for _, id := range []string{ll.active, ll.next} {
		if id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// Retire stops spending lease id: it is dry, or closed by another
// instance's gather (then the refill finds it unregistered and skips it).
func (ll *Lane) Retire(id string) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.active == id {
		ll.active = ""
		ll.retired = append(ll.retired, id)
	}
}

// Ours reports whether lease id is one of this lane's.
func (ll *Lane) Ours(id string) bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return id == ll.active || id == ll.next || slices.Contains(ll.retired, id)
}

// Used records a charge on the lane now: it is not idle.
func (ll *Lane) Used() {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.lastUse = time.Now()
}

// Charged records a lease batch on leaseID that charged n (the largest
// call being largest) and left the lease at left of limit.
func (ll *Lane) Charged(leaseID string, n, largest, left, limit int64) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.charged += n
	ll.maxCall = max(ll.maxCall, largest)
	ll.lastUse = time.Now()
	if ll.active == leaseID {
		ll.left, ll.limit = left, limit
	}
}

// WantSize is the size to ask a refill for: ten seconds of what the lane
// charged since its last refill, at least 4096 of its largest calls, at most
// maxSize (if set). It restarts the count. LeaseSize bounds it by what is
// free.
func (ll *Lane) WantSize(maxSize int64) int64 {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	elapsed := max(time.Since(ll.since), 50*time.Millisecond)
	want := max(int64(float64(ll.charged)*float64(10*time.Second)/float64(elapsed)), 4096*max(ll.maxCall, 1))
	ll.charged, ll.since = 0, time.Now()
	if maxSize > 0 {
		want = min(want, maxSize)
	}
	return want
}

// AwaitRefill waits for the lane's running refill, if any, to end, or for
// ctx to end; it reports whether there was one.
func (ll *Lane) AwaitRefill(ctx context.Context) bool {
	ll.mu.Lock()
	ch := ll.refilled
	ll.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
	return true
}

// AfterBatch records what a committed batch on the entitlement did: it
// left the entitlement as e, folded every lease (gathered), and took the
// lease took for this instance (nil if none), which becomes the active or
// the next one.
func (ll *Lane) AfterBatch(e *entitlement.Entitlement, gathered bool, took *entitlement.Lease) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.ent = e.Clone()
	if gathered {
		ll.active, ll.next, ll.retired = "", "", nil
	}
	if took != nil {
		if ll.active == "" {
			ll.active, ll.left, ll.limit = took.ID, took.Limit, took.Limit
		} else {
			ll.next = took.ID
		}
	}
}

// StartRefill reports whether a refill should start now, and marks it
// running: none runs or waits, the lane is not closing or pausing, and
// half of its active lease is spent (the next lease is there long before
// this one runs dry: leases are sized for seconds of traffic, so a refill
// delayed by contention still is). With no active lease, the next batch
// on the entitlement takes one instead.
func (ll *Lane) StartRefill() bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.closing || ll.refilling || ll.next != "" || time.Now().Before(ll.pauseUntil) ||
		ll.active == "" || ll.left*2 > ll.limit {
		return false
	}
	ll.beginRefill()
	return true
}

// BeginRefill marks a refill running whatever the lane's state (a test's
// forced refill).
func (ll *Lane) BeginRefill() {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.pauseUntil = time.Time{}
	ll.beginRefill()
}

func (ll *Lane) beginRefill() { ll.refilling, ll.refilled = true, make(chan struct{}) }

// EndRefill marks the lane's refill over, waking those waiting for it.
func (ll *Lane) EndRefill() {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.endRefill()
}

func (ll *Lane) endRefill() {
	ll.refilling = false
	if ll.refilled != nil {
		close(ll.refilled)
		ll.refilled = nil
	}
}

// Retired returns the leases the lane retired, for a refill to fold.
func (ll *Lane) Retired() []string {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return slices.Clone(ll.retired)
}

// Refilled ends a refill: it failed (err), or it folded the leases
// folded, left the entitlement as after, gathered every lease or not, and
// took lease took ("" if none was free). A refill that took nothing pauses
// the lane's refills for RefillPause.
func (ll *Lane) Refilled(failed bool, after *entitlement.Entitlement, folded []string, gathered bool, took string) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.endRefill()
	if failed || took == "" {
		ll.pauseUntil = time.Now().Add(RefillPause)
	}
	if failed {
		return
	}
	ll.ent = after.Clone()
	ll.retired = slices.DeleteFunc(ll.retired, func(id string) bool { return slices.Contains(folded, id) })
	if took == "" {
		return
	}
	if gathered {
		ll.active, ll.retired = "", nil
	}
	if ll.active == "" {
		l := after.Leases[len(after.Leases)-1]
		ll.active, ll.left, ll.limit = took, l.Limit, l.Limit
	} else {
		ll.next = took
	}
}

// Closing reports whether the lane is being released.
func (ll *Lane) Closing() bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return ll.closing
}

// Close marks the lane as being released: it takes no more leases, its
// idle check stops, and the store's calls go to the entitlement's batch.
func (ll *Lane) Close() {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.closing = true
	if ll.idleStop != nil {
		ll.idleStop.Stop()
	}
}

// IdleFor is how long the lane has gone without a charge.
func (ll *Lane) IdleFor() time.Duration {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return time.Since(ll.lastUse)
}

// ArmIdle runs check after d, unless the lane is closing (then or by
// then).
func (ll *Lane) ArmIdle(d time.Duration, check func()) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.closing {
		return
	}
	ll.idleStop = time.AfterFunc(d, check)
}
