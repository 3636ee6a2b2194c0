package main

import (
	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/fsledger"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
)

// LedgerNamespace returns the deployment namespace of the idempotency
// ledger. Deployments that share a database already differ by collection
// prefix, so the prefix identifies the deployment.
func LedgerNamespace(collectionPrefix string) string {
	return "stipend/" + collectionPrefix
}

// openLedger returns the ledger for the configured store: Firestore beside
// the Firestore store (on its client), memory beside the memory store.
func (m *Main) openLedger(client *firestore.Client) idempotency.Ledger {
	c := m.Config
	collection := idempotency.CollectionName(LedgerNamespace(c.CollectionPrefix))
	if c.Store == StoreMemory {
		m.Logger.Warn("idempotency ledger in memory: development only, not durable, not horizontally safe")
		return memledger.New(collection)
	}
	m.Logger.Info("idempotency ledger on firestore", "collection", collection, "database", c.FirestoreDatabase)
	return fsledger.New(client, collection)
}

// useLedger opens the ledger (on client, nil on the memory store) and puts
// it in front of the key-requiring routes of srv (api.LedgerRoutes).
func (m *Main) useLedger(srv *api.Server, client *firestore.Client) {
	ledger := m.openLedger(client)
	opts := idempotency.Options{
		Namespace:   LedgerNamespace(m.Config.CollectionPrefix),
		Retention:   m.Config.LedgerRetention,
		Development: m.Config.Development(),
		Logger:      m.Logger,
		// The ledger shares the store's database (Firestore: its client;
		// memory: its process), so the store checks its fences, and an
		// in-progress key whose change never committed heals itself.
		Fenced: true,
	}
	m.failpoints.arm(m, &opts) // nothing outside the crash test's build
	srv.UseLedger(ledger, opts)
}
