package firestore_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// newDeliveryStore returns a store on the emulator with a collection prefix
// of its own, so every subtest sees an empty store.
func newDeliveryStore(t *testing.T, now func() time.Time) store.DeliveryStore {
	t.Helper()
	return fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(emulator.Prefix(t)), fsstore.WithClock(now))
}

func TestDeliveryStore_Conformance(t *testing.T) {
	emulator.Host(t)
	conformance.RunDeliveryStoreTests(t, newDeliveryStore)
}

func TestDeliveryStore_Concurrency(t *testing.T) {
	emulator.Host(t)
	conformance.RunDeliveryStoreConcurrencyTests(t, newDeliveryStore)
}
