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

// subtest is one named case of a suite.
type subtest struct {
	name string
	run  func(t *testing.T, s store.EntitlementStore, clock *Clock)
}

// runTable runs each subtest in parallel with a fresh store and clock.
func runTable(t *testing.T, newStore NewStore, tests []subtest) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock()
			tc.run(t, newStore(t, clock.Now), clock)
		})
	}
}

// RunEntitlementStoreTests runs the contract of store.EntitlementStore for
// accounts, entitlements, CheckAndConsume, Check, consumptions and the event
// outbox. Payments and receipts are in RunPaymentTests.
func RunEntitlementStoreTests(t *testing.T, newStore NewStore) {
	t.Helper()
	var tests []subtest
	tests = append(tests, accountTests...)
	tests = append(tests, entitlementTests...)
	tests = append(tests, consumeTests...)
	tests = append(tests, denialTests...)
	tests = append(tests, selectionTests...)
	tests = append(tests, checkTests...)
	tests = append(tests, consumptionTests...)
	tests = append(tests, eventTests...)
	runTable(t, newStore, tests)
}

// RunPaymentTests runs the contract of payments, receipts and the events
// they write, including 20 concurrent CreatePayment and CompletePayment calls
// on one payment.
func RunPaymentTests(t *testing.T, newStore NewStore) {
	t.Helper()
	runTable(t, newStore, paymentTests)
}
