package firestore_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// newStore returns a store on the emulator with a collection prefix of its
// own, so every test and subtest sees an empty store.
func newStore(t *testing.T, now func() time.Time) store.EntitlementStore {
	t.Helper()
	return fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(emulator.Prefix(t)), fsstore.WithClock(now))
}

func TestEntitlementStore(t *testing.T) {
	emulator.Host(t)
	conformance.RunEntitlementStoreTests(t, newStore)
}

func TestPayments(t *testing.T) {
	emulator.Host(t)
	conformance.RunPaymentTests(t, newStore)
}

func TestConcurrency(t *testing.T) {
	emulator.Host(t)
	conformance.RunConcurrencyTests(t, newStore, conformance.ConcurrencyOptions{Rounds: 10})
}
