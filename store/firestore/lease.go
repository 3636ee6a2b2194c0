package firestore

import (
	"time"
)

// Escrow leases: when several instances charge one hot entitlement, each
// instance's batches would all lock and write the entitlement's document,
// and Firestore serializes (the emulator deadlocks) their commits. So a lane
// that is hot while another instance is active takes a lease
// (entitlement/lease.go): a slice of the entitlement in a document of its
// own, which its consume batches then read and write instead of the
// entitlement (lease_charge.go). A background refill takes the next lease
// before the current one runs dry, and folds the dry ones back
// (lease_refill.go); a lane idle for LeaseOptions.Idle, or a store shut down
// with ReleaseLeases or Close, folds its leases. What this instance knows of
// its leases is package escrow's (internal/escrow), with a screen on the
// whole consume path. Whatever does not fit a lease
// (holds, captures, releases, refunds, a call larger than what is left)
// goes through the entitlement's own batch, which folds every lease first
// (a gather) when the end of what is free is near, a new quota period
// starts, or a quota refund needs the exact count (gather.go).
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
	// TTL is how long a lease stays reserved without its owner renewing it
	// (default 30 s): an instance renews its leases with every refill, and
	// any instance folds a lease past its deadline in its next transaction
	// on the entitlement, so what a crashed instance reserved is free again
	// within TTL of its last refill. Safety never depends on it
	// (entitlement.OpenLease).
	TTL time.Duration
}

// WithLeases sets how the store leases hot entitlements.
func WithLeases(o LeaseOptions) Option {
	return func(s *Store) {
		if o.Idle <= 0 {
			o.Idle = 2 * time.Second
		}
		if o.TTL <= 0 {
			o.TTL = defaultLeaseTTL
		}
		s.leaseOpt = o
	}
}

// defaultLeaseTTL is LeaseOptions.TTL's default.
const defaultLeaseTTL = 30 * time.Second
