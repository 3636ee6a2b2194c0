package firestore

import (
	"context"
	"sync"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
)

// Escrow leases: when several instances charge one hot entitlement, each
// instance's batches would all lock and write the entitlement's document,
// and Firestore serializes (the emulator deadlocks) their commits. So a lane
// that is hot while another instance is active takes a lease
// (entitlement/lease.go): a slice of the entitlement in a document of its
// own, which its consume batches then read and write instead of the
// entitlement (lease_batch.go). A background refill takes the next lease
// before the current one runs dry, and folds the dry ones back
// (lease_refill.go); a lane idle for LeaseOptions.Idle, or a store shut down
// with ReleaseLeases, folds its leases. Whatever does not fit a lease
// (holds, captures, releases, refunds, a call larger than what is left)
// goes through the entitlement's own batch, which folds every lease first
// (a gather) when the end of what is free is near, a new quota period
// starts, or a quota refund needs the exact count (batch_lease.go).
// Safety never depends on this process's memory or a clock: every lease
// charge reads its lease in its own transaction.

// LeaseOptions tunes escrow leases. The zero value is the production
// behaviour; Force and MaxSize are for tests and benchmarks.
type LeaseOptions struct {
	// Off never takes a lease: every charge writes the entitlement.
	Off bool
	// Force leases every entitlement a consume charges, even with no other
	// instance in sight (tests and benchmarks of lease mode).
	Force bool
	// MaxSize bounds what one lease reserves, in cents or units (tests:
	// small leases run dry, refill and gather often); 0 is no bound.
	MaxSize int64
	// Idle is how long a lane keeps its leases without a charge (default
	// 2 s).
	Idle time.Duration
}

// WithLeases sets how the store leases hot entitlements.
func WithLeases(o LeaseOptions) Option {
	return func(s *Store) {
		if o.Idle <= 0 {
			o.Idle = 2 * time.Second
		}
		s.leaseOpt = o
	}
}

// refillPause is how long a lane waits before trying again after a refill
// that got no lease (nothing free) or failed.
const refillPause = 500 * time.Millisecond

// leasing holds the lease lanes of this instance, by entitlement ID.
type leasing struct {
	mu sync.Mutex
	m  map[string]*leaseLane
	// seen is when a batch last saw another instance active on an
	// entitlement, so its next hot batch leases even if that one alone
	// saw nothing (entries are dropped once stale).
	seen map[string]time.Time
}

// saw records that another instance is active on entitlementID.
func (l *leasing) saw(entitlementID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil || len(l.seen) > 1000 {
		l.seen = make(map[string]time.Time) // a bound, not a cache policy: a hot entitlement is seen again at once
	}
	l.seen[entitlementID] = time.Now()
}

// sawOther reports whether another instance was seen on entitlementID
// within recentWriter.
func (l *leasing) sawOther(entitlementID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.seen[entitlementID]
	return ok && time.Since(t) < recentWriter
}

// leaseLane is what this instance knows of its leases on one entitlement.
// Only the lane's drainer spends them; tx orders the lane's transactions on
// the entitlement (its direct batches, refills and the release), so they
// never contend with each other.
type leaseLane struct {
	id string
	tx sync.Mutex

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

// lane returns the lease lane of entitlementID, or nil if it has none or is
// releasing it.
func (l *leasing) lane(entitlementID string) *leaseLane {
	l.mu.Lock()
	defer l.mu.Unlock()
	ll := l.m[entitlementID]
	if ll == nil {
		return nil
	}
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.closing {
		return nil
	}
	return ll
}

// releasing reports whether the lease lane of entitlementID is being
// released.
func (l *leasing) releasing(entitlementID string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ll := l.m[entitlementID]
	if ll == nil {
		return false
	}
	ll.mu.Lock()
	defer ll.mu.Unlock()
	return ll.closing
}

// ensure returns the lease lane of e, making it if new (created true).
func (l *leasing) ensure(e *entitlement.Entitlement) (ll *leaseLane, created bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]*leaseLane)
	}
	if ll = l.m[e.ID]; ll != nil {
		return ll, false
	}
	ll = &leaseLane{id: e.ID, ent: e.Clone(), since: time.Now(), lastUse: time.Now()}
	l.m[e.ID] = ll
	return ll, true
}

// drop forgets ll (after its release).
func (l *leasing) drop(ll *leaseLane) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m[ll.id] == ll {
		delete(l.m, ll.id)
	}
}

// all returns every lease lane.
func (l *leasing) all() []*leaseLane {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*leaseLane, 0, len(l.m))
	for _, ll := range l.m {
		out = append(out, ll)
	}
	return out
}

// current returns the lease to spend: the active one, or the next one
// once the active one is retired; "" if none.
func (ll *leaseLane) current() string {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.active == "" && ll.next != "" {
		ll.active, ll.next = ll.next, ""
	}
	return ll.active
}

// retire stops spending lease id: it is dry, or closed by another
// instance's gather (then the refill finds it unregistered and skips it).
func (ll *leaseLane) retire(id string) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.active == id {
		ll.active = ""
		ll.retired = append(ll.retired, id)
	}
}

// ours reports whether lease id is one of this lane's.
func (ll *leaseLane) ours(id string) bool {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if id == ll.active || id == ll.next {
		return true
	}
	for _, r := range ll.retired {
		if r == id {
			return true
		}
	}
	return false
}

// forgetAll drops every lease of the lane: a gather folded them.
func (ll *leaseLane) forgetAll() {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.active, ll.next, ll.retired = "", "", nil
}

// spent records a lease batch that charged n (the largest call being
// largest).
func (ll *leaseLane) spent(n, largest int64) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	ll.charged += n
	ll.maxCall = max(ll.maxCall, largest)
	ll.lastUse = time.Now()
}

// wantSize is the size to ask a refill for: ten seconds of what the lane
// charged since its last refill, at least 4096 of its largest calls, at most
// maxSize (if set). It restarts the count. LeaseSize bounds it by what is
// free.
func (ll *leaseLane) wantSize(maxSize int64) int64 {
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

// awaitRefill waits for the lane's running refill, if any, to end, or for
// ctx (the batch's: its last caller left) to end; it reports whether there
// was one.
func (ll *leaseLane) awaitRefill(ctx context.Context) bool {
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
