package memory_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
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

// TestStore_Fencing runs the fencing suite on the memory store and the
// memory ledger, which checks its fences under the store's lock.
func TestStore_Fencing(t *testing.T) {
	conformance.RunFenceTests(t, func(_ *testing.T, now func() time.Time) conformance.Fenced {
		return conformance.Fenced{
			Store:  memory.New(memory.WithClock(now)),
			Ledger: memledger.New(idempotency.CollectionName("test"), memledger.WithClock(now)),
		}
	})
}

// TestStore_Instances runs the multi-instance suite on one memory store
// behind every "instance" (the memory store is one process's).
func TestStore_Instances(t *testing.T) {
	conformance.RunInstanceTests(t, func(_ *testing.T, n int, now func() time.Time) []store.EntitlementStore {
		s := memory.New(memory.WithClock(now))
		out := make([]store.EntitlementStore, n)
		for i := range out {
			out[i] = s
		}
		return out
	}, conformance.InstanceOptions{})
}
