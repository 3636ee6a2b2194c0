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

// Candidates returns the candidates document of accountID (candidates.go):
// the entitlements and wallets it names, and whether it exists. Only
// tests compile this file.
func Candidates(ctx context.Context, s *Store, accountID string) (entitlements, wallets []string, ok bool, err error) {
	snap, err := s.candidatesRef(accountID).Get(ctx)
	if isNotFound(err) {
		return nil, nil, false, nil
	} else if err != nil {
		return nil, nil, false, err
	}
	c, err := candidatesFrom(snap)
	return c.Entitlements, c.Wallets, true, err
}

// SetCandidates stores the candidates document of accountID as given, or,
// with drop, deletes it (as an account stored before the document
// existed). Only tests compile this file.
func SetCandidates(ctx context.Context, s *Store, accountID string, entitlements, wallets []string, drop bool) error {
	ref := s.candidatesRef(accountID)
	if drop {
		_, err := ref.Delete(ctx)
		return err
	}
	_, err := ref.Set(ctx, encode(candidatesFields(&candidates{Entitlements: entitlements, Wallets: wallets})))
	return err
}
