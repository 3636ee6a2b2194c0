package firestore_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

func TestDeliveryStore(t *testing.T) {
	client := emulator.Client(t)
	conformance.RunDeliveryStoreTests(t, func(t *testing.T, now func() time.Time) store.DeliveryStore {
		return fsstore.New(client, fsstore.WithCollectionPrefix(emulator.Prefix(t)), fsstore.WithClock(now))
	})
}
