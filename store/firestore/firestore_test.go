package firestore_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// openStore returns a store on the emulator with a collection prefix of its
// own, so every test and subtest sees an empty store.
func openStore(t *testing.T, now func() time.Time) *fsstore.Store {
	t.Helper()
	s := fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(emulator.Prefix(t)), fsstore.WithClock(now))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newStore(t *testing.T, now func() time.Time) store.EntitlementStore { return openStore(t, now) }

func newDeliveryStore(t *testing.T, now func() time.Time) store.DeliveryStore {
	return openStore(t, now)
}

func TestStore_Conformance(t *testing.T) {
	emulator.Host(t)
	conformance.RunTests(t, newStore)
}

func TestStore_Concurrency(t *testing.T) {
	emulator.Host(t)
	conformance.RunConcurrencyTests(t, newStore, conformance.ConcurrencyOptions{})
}

// TestStore_Property runs 10 rounds, not the default 30, to keep the
// emulator suite short.
func TestStore_Property(t *testing.T) {
	emulator.Host(t)
	conformance.RunPropertyTests(t, newStore, conformance.ConcurrencyOptions{Rounds: 10})
}

func TestDeliveryStore_Conformance(t *testing.T) {
	emulator.Host(t)
	conformance.RunDeliveryStoreTests(t, newDeliveryStore)
}

func TestDeliveryStore_Concurrency(t *testing.T) {
	emulator.Host(t)
	conformance.RunDeliveryStoreConcurrencyTests(t, newDeliveryStore)
}

// TestStore_InstantsInCommitOrder runs the commit-order suite on two
// stores on one emulator.
func TestStore_InstantsInCommitOrder(t *testing.T) {
	emulator.Host(t)
	conformance.RunCommitOrderTests(t, func(t *testing.T, endClock func() time.Time) (store.EntitlementStore, store.EntitlementStore) {
		prefix := emulator.Prefix(t)
		client := emulator.Client(t)
		return fsstore.New(client, fsstore.WithCollectionPrefix(prefix), fsstore.WithClock(endClock)),
			fsstore.New(client, fsstore.WithCollectionPrefix(prefix))
	})
}
