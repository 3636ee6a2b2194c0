package firestore

import (
	"context"
	"errors"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store/firestore/internal/escrow"
)

// directInfo is what an entitlement batch saw, for the lane's leases.
type directInfo struct {
	e        entitlement.Entitlement // as the batch left it
	found    bool
	gathered bool               // the batch folded every lease
	took     *entitlement.Lease // the lease the batch took for this instance
	other    bool               // it saw another instance active
}

// afterDirect updates the lease lane ll (nil if none) of the entitlement
// after one of its batches committed: a gather leaves the lane without
// leases, a lease the batch took becomes the lane's (making the lane if
// need be), and a lane whose lease is being spent may refill.
func (s *Store) afterDirect(ll *escrow.Lane, d directInfo) {
	if d.other {
		s.leasing.Saw(d.e.ID)
	}
	if ll == nil && d.took == nil {
		return
	}
	if ll == nil {
		var created bool
		if ll, created = s.leasing.Ensure(&d.e); created {
			s.watchIdle(ll)
		}
	}
	if d.took != nil {
		s.counters.refills.Add(1)
	}
	ll.AfterBatch(&d.e, d.gathered, d.took)
	s.maybeRefill(ll)
}

// maybeRefill starts a refill of ll in the background when the lane asks
// for one (escrow.Lane.StartRefill).
func (s *Store) maybeRefill(ll *escrow.Lane) {
	if ll.StartRefill() && !s.bg.goFn(func() { s.refill(ll) }) {
		ll.EndRefill() // the store is closing
	}
}

// refill is one transaction on the entitlement: it folds the lane's retired
// leases (those still registered: a gather may have folded them), gathers
// every lease if a new quota period starts, and takes a new lease of
// entitlement.Entitlement.LeaseSize for the lane, its next one.
func (s *Store) refill(ll *escrow.Lane) {
	ll.Tx.Lock()
	defer ll.Tx.Unlock()
	if ll.Closing() {
		// Released while this refill waited for the lane's transactions: a
		// lease taken now would belong to no lane (nothing would spend or
		// release it).
		ll.EndRefill()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.retryBudget)
	defer cancel()
	want := ll.WantSize(s.leaseOpt.MaxSize)
	retired := ll.Retired()
	var (
		took     string
		after    entitlement.Entitlement
		gathered bool
	)
	err := s.runGuarded(ctx, "refill lease", func(ctx context.Context, tx *firestore.Transaction) error {
		took, gathered = "", false
		e, put, err := s.foldLeases(ctx, tx, ll.ID(), func(e *entitlement.Entitlement, now time.Time) ([]string, bool) {
			gathered = e.NeedsGather(now, 0)
			// The retired leases, and those whose owner (this instance or
			// one that died) stopped renewing them.
			return append(slices.Clone(retired), e.ExpiredLeases(now)...), gathered
		})
		if err != nil || e == nil {
			return err
		}
		now := s.clock()
		e.Refresh(now)
		e.RenewLeases(ll.Leases(), now.Add(s.leaseOpt.TTL)) // this instance is alive
		if n := e.LeaseSize(now, want); n > 0 {
			l := e.TakeLease(uuid.NewString(), s.owner, n, now.Add(s.leaseOpt.TTL))
			if err := tx.Create(s.leaseRef(e.ID, l.ID), leaseDoc(&l)); err != nil {
				return err
			}
			took = l.ID
		}
		after = *e
		return put(s.writtenDoc(e, now))
	})
	if err == nil && took != "" {
		s.counters.refills.Add(1)
	}
	ll.Refilled(err != nil, &after, retired, gathered, took)
}

// foldLeases reads the entitlement id and its leases for tx (guarded,
// guard.go) and folds the leases pick names (all: every registered one)
// that it still registers, writing them closed; the caller writes the
// entitlement with put. It returns nil for a missing entitlement.
func (s *Store) foldLeases(ctx context.Context, tx *firestore.Transaction, id string, pick func(*entitlement.Entitlement, time.Time) (ids []string, all bool)) (_ *entitlement.Entitlement, put func(doc map[string]any) error, _ error) {
	snaps, err := s.readGuarded(ctx, s.entitlementRef(id))
	if err != nil || !snaps[0].Exists() {
		return nil, nil, err
	}
	snap := snaps[0]
	put = func(doc map[string]any) error { return putGuarded(tx, snap, doc) }
	e, err := entitlementFrom(snap)
	if err != nil {
		return nil, nil, err
	}
	ids, all := pick(&e, s.clock())
	var refs []*firestore.DocumentRef
	for _, o := range e.Leases {
		if all || slices.Contains(ids, o.ID) {
			refs = append(refs, s.leaseRef(id, o.ID))
		}
	}
	if len(refs) == 0 {
		return &e, put, nil
	}
	if snaps, err = s.readGuarded(ctx, refs...); err != nil {
		return nil, nil, err
	}
	leases, err := leasesOf(snaps)
	if err != nil {
		return nil, nil, err
	}
	for i := range leases {
		if !e.Fold(&leases[i]) {
			return nil, nil, corruptLease(refs[i])
		}
		if err := putGuarded(tx, snaps[i], leaseDoc(&leases[i])); err != nil {
			return nil, nil, err
		}
	}
	return &e, put, nil
}

// watchIdle releases ll's leases once it has gone LeaseOptions.Idle
// without a lease charge. The check re-arms itself while the lane is in
// use, never once the lane is being released or the store is closing.
func (s *Store) watchIdle(ll *escrow.Lane) {
	var check func()
	arm := func(d time.Duration) {
		ll.ArmIdle(d, func() {
			if s.bg.enter() {
				defer s.bg.leave()
				check()
			}
		})
	}
	check = func() {
		if idle := ll.IdleFor(); idle < s.leaseOpt.Idle {
			arm(s.leaseOpt.Idle - idle)
			return
		}
		if err := s.release(context.Background(), ll); err != nil {
			// The lane is dropped all the same: its leases are folded by the
			// next gather that needs them, or once their deadline passes.
			s.log.Warn("releasing an idle entitlement's leases failed; they are freed by their deadline",
				"entitlement", ll.ID(), "ttl", s.leaseOpt.TTL.String(), "error", err.Error())
		}
	}
	arm(s.leaseOpt.Idle)
}

// release folds every lease of ll and forgets the lane. Calls arriving
// meanwhile go through the entitlement's batch.
func (s *Store) release(ctx context.Context, ll *escrow.Lane) error {
	ll.Close()
	ll.Tx.Lock()
	defer ll.Tx.Unlock()
	defer s.leasing.Drop(ll)
	ctx, cancel := context.WithTimeout(ctx, s.retryBudget)
	defer cancel()
	return s.runGuarded(ctx, "release leases", func(ctx context.Context, tx *firestore.Transaction) error {
		e, put, err := s.foldLeases(ctx, tx, ll.ID(), func(e *entitlement.Entitlement, _ time.Time) ([]string, bool) {
			var ids []string
			for _, o := range e.Leases {
				if ll.Ours(o.ID) {
					ids = append(ids, o.ID)
				}
			}
			return ids, false
		})
		if err != nil || e == nil {
			return err
		}
		return put(entitlementDoc(e))
	})
}

// ReleaseLeases folds every lease this store holds back into its
// entitlement. Call it on shutdown (before closing the client), so the
// other instances need no gather to spend what this one had reserved; a
// store that never calls it (a crash) loses nothing either: its leases are
// folded by the first gather that needs them.
func (s *Store) ReleaseLeases(ctx context.Context) error {
	var errs []error
	for _, ll := range s.leasing.All() {
		errs = append(errs, s.release(ctx, ll))
	}
	return errors.Join(errs...)
}
