package memory_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
)

func newStore(_ *testing.T, now func() time.Time) store.EntitlementStore {
	return memory.New(memory.WithClock(now))
}

func TestStore(t *testing.T) {
	conformance.RunEntitlementStoreTests(t, newStore)
}

func TestStore_Payments(t *testing.T) {
	conformance.RunPaymentTests(t, newStore)
}

func TestStore_Concurrency(t *testing.T) {
	conformance.RunConcurrencyTests(t, newStore, conformance.ConcurrencyOptions{MaxCallers: 64})
}
