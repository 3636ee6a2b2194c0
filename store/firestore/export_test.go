package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
)

// PauseLane holds back the calls queued on the lane of entitlementID: a
// test queues several and then calls resume, which applies them as one
// batch (up to the batch limits). waitQueued blocks until n calls are
// queued. A busy lane is waited for first. Only tests compile this file.
func PauseLane(s *Store, entitlementID string) (waitQueued func(n int), resume func()) {
	return s.lanes.Pause(entitlementID)
}

// LeaseState returns entitlement id as stored (its settled balance and
// registry, without the leases folded) and every lease document it has
// had, open or closed. Only tests compile this file.
func LeaseState(ctx context.Context, s *Store, id string) (entitlement.Entitlement, []entitlement.Lease, error) {
	e, _, err := s.storedEntitlement(ctx, id)
	if err != nil {
		return e, nil, err
	}
	snaps, err := s.col(colLeases).Where("entitlementId", "==", id).Documents(ctx).GetAll()
	if err != nil {
		return e, nil, err
	}
	leases, err := leasesOf(snaps)
	return e, leases, err
}

// TakeLease makes s take a lease on entitlement id now, as its lane's
// refill does, and reports whether it holds one after. Only tests compile
// this file.
func TakeLease(ctx context.Context, s *Store, id string) (bool, error) {
	e, _, err := s.storedEntitlement(ctx, id)
	if err != nil {
		return false, err
	}
	ll, created := s.leasing.Ensure(&e)
	if created {
		s.watchIdle(ll)
	}
	ll.BeginRefill()
	s.refill(ll)
	return ll.HasLease(), nil
}

// RefillAfterRelease releases the lease lane of entitlement id, then runs
// on it a refill that was started before the release and waited for the
// lane's transactions meanwhile. Only tests compile this file.
func RefillAfterRelease(ctx context.Context, s *Store, id string) error {
	e, _, err := s.storedEntitlement(ctx, id)
	if err != nil {
		return err
	}
	ll, _ := s.leasing.Ensure(&e)
	ll.BeginRefill() // started before the release
	if err := s.release(ctx, ll); err != nil {
		return err
	}
	s.refill(ll)
	return nil
}
