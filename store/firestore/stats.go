package firestore

import (
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/status"
)

// Stats counts what this store's transactions met since it was made: the
// numbers to watch on a hot entitlement (docs/operations.md).
type Stats struct {
	// Batches and LeaseBatches are the committed batches on entitlements
	// and on leases.
	Batches, LeaseBatches int64
	// Aborts are transaction attempts that failed with contention
	// (Aborted); LockTimeouts those of them that waited out a lock
	// ("Transaction lock timeout", the emulator's deadlock breaker).
	Aborts, LockTimeouts int64
	// Conflicts are attempts of the optimistic hot path (guard.go) that
	// were retried: a commit found a document changed since it was read,
	// or the read was torn. Contention without locks, retried like an
	// abort but not counted in Aborts.
	Conflicts int64
	// Refills are leases taken; Gathers the transactions that folded every
	// lease of an entitlement.
	Refills, Gathers int64
	// Expired are leases this instance's batches folded because their
	// owner stopped renewing them (LeaseOptions.TTL): a crashed instance's
	// share, freed.
	Expired int64
}

// counters are the live Stats.
type counters struct {
	batches, leaseBatches, aborts, lockTimeouts, conflicts, refills, gathers, expired atomic.Int64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	c := &s.counters
	return Stats{
		Batches: c.batches.Load(), LeaseBatches: c.leaseBatches.Load(),
		Aborts: c.aborts.Load(), LockTimeouts: c.lockTimeouts.Load(), Conflicts: c.conflicts.Load(),
		Refills: c.refills.Load(), Gathers: c.gathers.Load(), Expired: c.expired.Load(),
	}
}

// countRetry counts a failed attempt that run retries; stale: its commit
// found a guarded document changed.
func (c *counters) countRetry(err error, stale bool) {
	if stale {
		c.conflicts.Add(1)
		return
	}
	c.aborts.Add(1)
	if strings.Contains(strings.ToLower(status.Convert(err).Message()), "lock timeout") {
		c.lockTimeouts.Add(1)
	}
}
