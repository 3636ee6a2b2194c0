package memory_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
)

// newDeliveryStore returns a new, empty memory store.
func newDeliveryStore(_ *testing.T, now func() time.Time) store.DeliveryStore {
	return memory.New(memory.WithClock(now))
}

func TestDeliveryStore_Conformance(t *testing.T) {
	conformance.RunDeliveryStoreTests(t, newDeliveryStore)
}

func TestDeliveryStore_Concurrency(t *testing.T) {
	conformance.RunDeliveryStoreConcurrencyTests(t, newDeliveryStore)
}
