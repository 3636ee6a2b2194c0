package memory_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
)

// newStore returns a new, empty memory store.
func newStore(_ *testing.T, now func() time.Time) store.EntitlementStore {
	return memory.New(memory.WithClock(now))
}

func TestStore_Conformance(t *testing.T) {
	conformance.RunTests(t, newStore)
}

func TestStore_Concurrency(t *testing.T) {
	conformance.RunConcurrencyTests(t, newStore, conformance.ConcurrencyOptions{MaxCallers: 64})
}

func TestStore_Property(t *testing.T) {
	conformance.RunPropertyTests(t, newStore, conformance.ConcurrencyOptions{MaxCallers: 64})
}
