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

// fresh returns a new, empty memory store as an S (the store contract the
// suite tests).
func fresh[S any](_ *testing.T, now func() time.Time) S {
	return any(memory.New(memory.WithClock(now))).(S)
}

func TestStore_Conformance(t *testing.T) {
	conformance.RunTests(t, fresh[store.EntitlementStore])
}

func TestStore_Concurrency(t *testing.T) {
	conformance.RunConcurrencyTests(t, fresh[store.EntitlementStore], conformance.ConcurrencyOptions{MaxCallers: 64})
}

func TestStore_Property(t *testing.T) {
	conformance.RunPropertyTests(t, fresh[store.EntitlementStore], conformance.ConcurrencyOptions{MaxCallers: 64})
}

func TestDeliveryStore_Conformance(t *testing.T) {
	conformance.RunDeliveryStoreTests(t, fresh[store.DeliveryStore])
}

func TestDeliveryStore_Concurrency(t *testing.T) {
	conformance.RunDeliveryStoreConcurrencyTests(t, fresh[store.DeliveryStore])
}

// TestStore_Fencing runs the fencing suite on the memory store and the
// memory ledger, which checks its fences under the store's lock.
func TestStore_Fencing(t *testing.T) {
	conformance.RunFenceTests(t, func(t *testing.T, now func() time.Time) conformance.Fenced {
		return conformance.Fenced{
			Store:  fresh[*memory.Store](t, now),
			Ledger: memledger.New(idempotency.CollectionName("test"), memledger.WithClock(now)),
		}
	})
}

// TestStore_Instances runs the multi-instance suite on one memory store
// behind every "instance" (the memory store is one process's).
func TestStore_Instances(t *testing.T) {
	conformance.RunInstanceTests(t, func(t *testing.T, n int, now func() time.Time) []store.EntitlementStore {
		s := fresh[store.EntitlementStore](t, now)
		out := make([]store.EntitlementStore, n)
		for i := range out {
			out[i] = s
		}
		return out
	}, conformance.InstanceOptions{})
}
