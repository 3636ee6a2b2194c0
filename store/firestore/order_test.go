package firestore_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

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
