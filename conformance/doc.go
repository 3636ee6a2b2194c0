// Package conformance holds the test suites every store and idempotency
// ledger must pass: the contracts of store.EntitlementStore,
// store.DeliveryStore and idempotency.Ledger, written once and run against
// each backend.
//
// # Entry points
//
// Each contract has an entry point for its ordinary behaviour and one for
// its guarantees under concurrent callers; the entitlement store also has a
// randomised property suite:
//
//	contract                 ordinary                   concurrent callers
//	store.EntitlementStore   RunTests                   RunConcurrencyTests, RunPropertyTests
//	store.DeliveryStore      RunDeliveryStoreTests      RunDeliveryStoreConcurrencyTests
//	idempotency.Ledger       RunLedgerTests             RunLedgerConcurrencyTests
//
// None calls another. Every backend (store/memory, store/firestore and
// store/postgres for the stores; idempotency/memledger, idempotency/fsledger
// and idempotency/pgledger for the ledger)
// passes every entry point of the contracts it implements, each called from
// one short test of its own, named alike in every backend:
//
//	func TestStore_Conformance(t *testing.T) { conformance.RunTests(t, newStore) }
//	func TestStore_Concurrency(t *testing.T) {
//		conformance.RunConcurrencyTests(t, newStore, conformance.ConcurrencyOptions{})
//	}
//	func TestStore_Property(t *testing.T) {
//		conformance.RunPropertyTests(t, newStore, conformance.ConcurrencyOptions{})
//	}
//	func TestDeliveryStore_Conformance(t *testing.T) { … RunDeliveryStoreTests … }
//	func TestDeliveryStore_Concurrency(t *testing.T) { … RunDeliveryStoreConcurrencyTests … }
//	func TestLedger_Conformance(t *testing.T)        { … RunLedgerTests … }
//	func TestLedger_Concurrency(t *testing.T)        { … RunLedgerConcurrencyTests … }
//
// # A fresh store per subtest
//
// Every subtest (every round of the property suite) calls the constructor it
// is given (NewStore, NewDeliveryStore, NewLedger) for a fresh, empty backend
// that reads time from the subtest's own Clock, which starts at Start and
// moves only when the subtest moves it. The memory backends simply return a
// new value. The Firestore backends share one emulator client and give each
// subtest a collection prefix of its own (internal/emulator.Prefix) instead
// of clearing the emulator, because subtests run in parallel; the PostgreSQL
// backends give each subtest a schema of its own on the server scripts/test
// starts (internal/pgtest).
//
// Subtests run in parallel with their siblings (the property rounds run one
// after another, each with many concurrent callers), so a constructor must
// be safe to call from several goroutines.
//
// # Concurrency and -race
//
// The Concurrency and Property entry points release many goroutines at once
// on one key, one entitlement, one payment or one queue: exactly one caller
// wins, nothing is charged twice, balances never go below zero. They prove
// the most under the race detector, and scripts/test runs every suite with
// -race. Under contention a backend may answer store.CodeUnavailable (the
// emulator's lock timeouts are one); the payment races and the revocation
// among consumes retry such calls, as the contract allows, and require the
// retry to agree with the others.
//
// The random suites print their seed (t.Logf) and name it in every failure;
// ConcurrencyOptions{Seed: seed} replays the same rounds.
package conformance
