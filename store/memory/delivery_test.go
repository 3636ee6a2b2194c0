package memory_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
)

func TestDeliveryStore(t *testing.T) {
	conformance.RunDeliveryStoreTests(t, func(t *testing.T, now func() time.Time) store.DeliveryStore {
		return memory.New(memory.WithClock(now))
	})
}
