package main

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
	"github.com/stipend-mcp/stipend/store/memory"
)

// backend is what both stores are: the entitlement store and the webhook
// delivery store, on one database.
type backend interface {
	store.EntitlementStore
	store.DeliveryStore
}

// openStore returns the configured store: memory, or Firestore on client
// (nil on the memory store).
func (m *Main) openStore(ctx context.Context, client *firestore.Client) backend {
	c := m.Config
	if c.Store == StoreMemory {
		return memory.New()
	}
	st := fsstore.New(client, fsstore.WithCollectionPrefix(c.CollectionPrefix))
	m.Logger.Info("firestore store",
		"database", c.FirestoreDatabase, "collectionPrefix", c.CollectionPrefix, "emulator", c.FirestoreEmulatorHost)
	if c.FirestoreEmulatorHost != "" && !c.Development() {
		m.Logger.Warn("production mode on the Firestore emulator (FIRESTORE_EMULATOR_HOST is set): the emulator keeps nothing durable")
	}

	// A failed probe is logged, not fatal: /readyz keeps reporting it, and
	// the platform decides whether to route traffic.
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := st.Ping(pctx); err != nil {
		m.Logger.Warn("firestore is not answering yet", "err", err)
	}
	return st
}
