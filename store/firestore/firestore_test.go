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
	s := fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(emulator.Prefix(t)), fsstore.WithClock(now))
	t.Cleanup(func() { _ = s.Close() })
	return s
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
