package firestore_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/fsledger"
	"github.com/stipend-mcp/stipend/internal/emulator"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// TestStore_Fencing runs the fencing suite on the Firestore store and the
// Firestore ledger in one database: the change's transaction reads the
// ledger's row and writes its mark.
func TestStore_Fencing(t *testing.T) {
	emulator.Host(t)
	conformance.RunFenceTests(t, func(t *testing.T, now func() time.Time) conformance.Fenced {
		client, prefix := emulator.Client(t), emulator.Prefix(t)
		return conformance.Fenced{
			Store:  fsstore.New(client, fsstore.WithCollectionPrefix(prefix), fsstore.WithClock(now)),
			Ledger: fsledger.New(client, idempotency.CollectionName(prefix), fsledger.WithClock(now)),
		}
	})
}
