// Package conformance holds the test suites every store.EntitlementStore
// must pass. Each backend's test file calls them with a constructor:
//
//	func TestStore(t *testing.T) {
//		newStore := func(t *testing.T, now func() time.Time) store.EntitlementStore { … }
//		conformance.RunEntitlementStoreTests(t, newStore)
//		conformance.RunPaymentTests(t, newStore)
//		conformance.RunConcurrencyTests(t, newStore, conformance.ConcurrencyOptions{})
//	}
//
// Every subtest gets a fresh, empty store and its own clock, and runs in
// parallel with its siblings. The three entry points are independent: none
// calls another, so a backend calls all three.
package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// NewStore returns a fresh, empty store that reads time from now.
type NewStore func(t *testing.T, now func() time.Time) store.EntitlementStore

// suiteCase is one named case of a suite over a backend of type S.
type suiteCase[S any] struct {
	name string
	run  func(t *testing.T, s S, clock *Clock)
}

// subtest is one named case of the entitlement store suites.
type subtest = suiteCase[store.EntitlementStore]

// runTable runs each case in parallel with a fresh backend from open and a
// fresh clock. Every suite of this package runs through it.
func runTable[S any](t *testing.T, open func(t *testing.T, now func() time.Time) S, tests ...[]suiteCase[S]) {
	t.Helper()
	for _, table := range tests {
		for _, tc := range table {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				clock := NewClock()
				tc.run(t, open(t, clock.Now), clock)
			})
		}
	}
}

// RunEntitlementStoreTests runs the contract of store.EntitlementStore for
// accounts, entitlements, CheckAndConsume, Check, consumptions and the event
// outbox. Payments and receipts are in RunPaymentTests.
func RunEntitlementStoreTests(t *testing.T, newStore NewStore) {
	t.Helper()
	runTable(t, newStore, accountTests, entitlementTests, consumeTests, denialTests,
		selectionTests, checkTests, consumptionTests, eventTests)
}

// RunPaymentTests runs the contract of payments, receipts and the events
// they write, including 20 concurrent CreatePayment and CompletePayment calls
// on one payment.
func RunPaymentTests(t *testing.T, newStore NewStore) {
	t.Helper()
	runTable(t, newStore, paymentTests)
}
